package giteatest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSceneChecks(t *testing.T) {
	tests := []struct {
		name  string
		scene Scene
	}{
		{name: "repo of unknown owner", scene: Scene{Repos: []Repo{{Owner: "x", Name: "r"}}}},
		{name: "duplicate owner", scene: Scene{Orgs: []Org{{Name: "a"}}, Users: []string{"a"}}},
		{name: "duplicate repo", scene: Scene{Users: []string{"a"}, Repos: []Repo{{Owner: "a", Name: "r"}, {Owner: "a", Name: "r"}}}},
		{name: "job in unknown repo", scene: Scene{Users: []string{"a"}, Jobs: []Job{{ID: 1, Owner: "a", Repo: "r", Status: StatusQueued}}}},
		{name: "job with API-invalid status", scene: Scene{Users: []string{"a"}, Repos: []Repo{{Owner: "a", Name: "r"}},
			Jobs: []Job{{ID: 1, Owner: "a", Repo: "r", Status: "running"}}}},
		{name: "duplicate job", scene: Scene{Users: []string{"a"}, Repos: []Repo{{Owner: "a", Name: "r"}},
			Jobs: []Job{{ID: 1, Owner: "a", Repo: "r", Status: StatusQueued}, {ID: 1, Owner: "a", Repo: "r", Status: StatusQueued}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Error(t, New().Load(tt.scene))
		})
	}
}

func TestJobChanges(t *testing.T) {
	s := start(t, queuedScene(1))
	assert.Error(t, s.SetJobStatus(99, StatusQueued, ""), "unknown job")
	assert.Error(t, s.SetJobStatus(1, "running", ""), "unknown status")
	require.NoError(t, s.SetJobStatus(1, StatusInProgress, "rg-abcde"))
	require.NoError(t, s.AddJob(Job{ID: 2, Owner: "root", Repo: "r", Status: StatusBlocked}))
	assert.Error(t, s.AddJob(Job{ID: 3, Owner: "root", Repo: "missing", Status: StatusBlocked}))

	a := get(t, s, "/api/v1/admin/actions/jobs?status=in_progress", token)
	assert.Contains(t, a.body, `"runner_name":"rg-abcde"`)
	assert.Contains(t, a.body, `"runner_id":1001`)

	s.RemoveJob(1)
	a = get(t, s, "/api/v1/admin/actions/jobs", token)
	assert.Equal(t, "1", a.header.Get("X-Total-Count"))
}
