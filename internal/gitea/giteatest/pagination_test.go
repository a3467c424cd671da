package giteatest

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMiddlePageHasAllLinks(t *testing.T) {
	s := start(t, queuedScene(5))
	a := get(t, s, "/api/v1/repos/root/r/actions/jobs?status=queued&limit=2&page=2", token)
	require.Equal(t, http.StatusOK, a.status)
	base := s.URL + "/api/v1/repos/root/r/actions/jobs?limit=2&page="
	assert.Equal(t,
		`<`+base+`3&status=queued>; rel="next",<`+base+`3&status=queued>; rel="last",`+
			`<`+base+`1&status=queued>; rel="first",<`+base+`1&status=queued>; rel="prev"`,
		a.header.Get("Link"))
	assert.Equal(t, "5", a.header.Get("X-Total-Count"))
}

func TestLimitDefaultsAndCap(t *testing.T) {
	tests := []struct {
		query string
		want  int
	}{
		{query: "", want: DefaultPageSize},
		{query: "?limit=0", want: DefaultPageSize},
		{query: "?limit=7", want: 7},
		{query: "?limit=500", want: MaxPageSize},
	}
	s := start(t, queuedScene(60))
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			a := get(t, s, "/api/v1/admin/actions/jobs"+tt.query, token)
			var body struct {
				Jobs       []json.RawMessage `json:"jobs"`
				TotalCount int               `json:"total_count"`
			}
			require.NoError(t, json.Unmarshal([]byte(a.body), &body))
			assert.Len(t, body.Jobs, tt.want)
			assert.Equal(t, 60, body.TotalCount)
		})
	}
}
