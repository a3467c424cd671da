package giteatest

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestFaultsApplyToTheNextRequestsInOrder(t *testing.T) {
	s := start(t, queuedScene(1))
	s.InjectFault(2, Fault{Status: 500})
	s.InjectFault(1, Fault{Status: 200, Body: "garbage", ContentType: "text/plain"})

	var got []int
	for range 4 {
		got = append(got, get(t, s, "/api/v1/admin/actions/jobs", token).status)
	}
	assert.Equal(t, []int{500, 500, 200, 200}, got)
	assert.Equal(t, 4, s.RequestCount())
	s.ResetRequests()
	assert.Zero(t, s.RequestCount())
	assert.Empty(t, s.Requests())
}

func TestDelayFaultHoldsTheAnswer(t *testing.T) {
	s := start(t, queuedScene(1))
	s.InjectFault(1, Fault{Delay: 100 * time.Millisecond})
	begin := time.Now()
	a := get(t, s, "/api/v1/admin/actions/jobs", token)
	assert.Equal(t, http.StatusOK, a.status)
	assert.GreaterOrEqual(t, time.Since(begin), 100*time.Millisecond)
}
