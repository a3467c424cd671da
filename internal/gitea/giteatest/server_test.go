package giteatest

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const token = "fake-test-token"

func start(t *testing.T, sc Scene) *Server {
	t.Helper()
	s := New()
	t.Cleanup(s.Close)
	s.AddToken(token, "root", true)
	require.NoError(t, s.Load(sc))
	return s
}

type answer struct {
	status int
	header http.Header
	body   string
}

func get(t *testing.T, s *Server, path, tok string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.URL+path, nil)
	require.NoError(t, err)
	if tok != "" {
		req.Header.Set("Authorization", "token "+tok)
	}
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

func queuedScene(n int) Scene {
	sc := Scene{Users: []string{"root"}, Repos: []Repo{{Owner: "root", Name: "r"}}}
	for i := range n {
		sc.Jobs = append(sc.Jobs, Job{ID: int64(i + 1), Owner: "root", Repo: "r", Name: "j", Status: StatusQueued})
	}
	return sc
}
