package ghslug

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSlug(t *testing.T) {
	tests := map[string]struct{ heading, want string }{
		"words":               {"Quick start on a real cluster", "quick-start-on-a-real-cluster"},
		"code span":           {"`why`: why a job has or has not got a runner", "why-why-a-job-has-or-has-not-got-a-runner"},
		"punctuation dropped": {"Rights, counts and the dry run", "rights-counts-and-the-dry-run"},
		"slash and colon":     {"Runner pods: `runnerTemplate` and `runnerTemplatePinned`", "runner-pods-runnertemplate-and-runnertemplatepinned"},
		"underscore kept":     {"The act_runner image", "the-act_runner-image"},
		"link text":           {"See [the chart](charts/README.md)", "see-the-chart"},
		"emphasis":            {"A *warm* pool", "a-warm-pool"},
		"double space":        {"a  b", "a--b"},
		"non-ASCII letters":   {"Grüße", "grüße"},
		"closing hashes":      {"Status ##", "status"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, Slug(Text(tc.heading)))
		})
	}
}

func TestSluggerDeduplicates(t *testing.T) {
	var s Slugger
	got := []string{s.Next("Example"), s.Next("Example"), s.Next("Example"), s.Next("Example 1")}
	assert.Equal(t, []string{"example", "example-1", "example-2", "example-1-1"}, got)
}
