package state

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzDecode: whatever a ConfigMap holds, Decode never panics; what it
// accepts encodes and decodes back to the same claims, so a rebuilt or
// rewritten state never changes meaning.
func FuzzDecode(f *testing.F) {
	f.Add(`{"version":1,"spawned":{"7":{"spawnedAt":"2026-11-21T12:00:00Z","jobName":"ci-abcde"}}}`)
	f.Add(`{"version":1,"spawned":{}}`)
	f.Add(`{"version":1,"spawned":{},"atWork":{"uid-a":"2026-11-21T12:00:00Z"}}`)
	f.Add(`{"version":2}`)
	f.Add(`}}garbage{{`)
	f.Add(``)
	f.Fuzz(func(t *testing.T, raw string) {
		claims, err := Decode(map[string]string{DataKey: raw})
		if err != nil {
			return
		}
		for id, c := range claims {
			assert.Positive(t, id)
			assert.NotEmpty(t, c.JobName)
			assert.False(t, c.ClaimedAt.IsZero())
		}
		again, err := Decode(Encode(claims))
		require.NoError(t, err)
		require.Len(t, again, len(Bound(claims, MaxClaims)))
		for id, c := range again {
			assert.Equal(t, claims[id].JobName, c.JobName)
			assert.True(t, claims[id].ClaimedAt.Truncate(time.Second).Equal(c.ClaimedAt), "claim %d: %v then %v", id, claims[id].ClaimedAt, c.ClaimedAt)
		}
	})
}
