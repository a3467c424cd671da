package state

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	in := Claims{1: {ClaimedAt: t0, JobName: "rg-abcde"}, 42: {ClaimedAt: t0.Add(time.Minute), JobName: "rg-fghjk"},
		-1: {ClaimedAt: t0, JobName: "rg-warm1"}}
	data := Encode(in)
	assert.Equal(t, Encode(in.Clone()), data, "equal states encode equally")
	out, err := Decode(data)
	require.NoError(t, err)
	assert.Equal(t, in, out)
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		data    map[string]string
		want    Claims
		wantErr string
	}{
		{name: "no data: someone emptied the ConfigMap", data: nil, wantErr: "has no spawned.json"},
		{name: "an empty value", data: map[string]string{DataKey: ""}, wantErr: "has no spawned.json"},
		{name: "garbage", data: map[string]string{DataKey: "{not json"}, wantErr: "cannot decode"},
		{name: "unknown version", data: map[string]string{DataKey: `{"version":9,"spawned":{}}`}, wantErr: "unknown format version 9"},
		{name: "bad id", data: map[string]string{DataKey: `{"version":1,"spawned":{"x":{"spawnedAt":"2026-11-21T12:00:00Z","jobName":"a"}}}`}, wantErr: `bad Gitea job id "x"`},
		{name: "a warm runner's claim has a negative key", data: map[string]string{DataKey: `{"version":1,"spawned":{"-2":{"spawnedAt":"2026-11-21T12:00:00Z","jobName":"a"}}}`},
			want: Claims{-2: {ClaimedAt: t0, JobName: "a"}}},
		{name: "zero is no key", data: map[string]string{DataKey: `{"version":1,"spawned":{"0":{"spawnedAt":"2026-11-21T12:00:00Z","jobName":"a"}}}`}, wantErr: `bad Gitea job id "0"`},
		{name: "incomplete entry", data: map[string]string{DataKey: `{"version":1,"spawned":{"3":{"jobName":""}}}`}, wantErr: "incomplete entry for Gitea job 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(tt.data)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestEncodeIsBounded(t *testing.T) {
	in := Claims{}
	for i := 1; i <= MaxClaims+10; i++ {
		in[int64(i)] = Entry{ClaimedAt: t0.Add(time.Duration(i) * time.Second), JobName: "j" + strconv.Itoa(i)}
	}
	out, err := Decode(Encode(in))
	require.NoError(t, err)
	assert.Len(t, out, MaxClaims)
	for i := 1; i <= 10; i++ {
		assert.NotContains(t, out, int64(i), "the oldest claims go first")
	}
	assert.Contains(t, out, int64(MaxClaims+10))
	assert.Less(t, len(Encode(in)[DataKey]), 512*1024, "far below the ConfigMap size limit")
}

func TestFromJobs(t *testing.T) {
	job := func(name, id string, created time.Time) batchv1.Job {
		return batchv1.Job{ObjectMeta: metav1.ObjectMeta{
			Name: name, CreationTimestamp: metav1.NewTime(created),
			Labels: map[string]string{"gitea.bpg.pw/gitea-job-id": id},
		}}
	}
	got := FromJobs([]batchv1.Job{
		job("a", "1", t0),
		job("b", "2", t0),
		job("b-retry", "2", t0.Add(6*time.Minute)),
		job("older-dup", "2", t0.Add(time.Minute)),
		job("no-id", "", t0),
		job("bad-id", "x", t0),
	})
	assert.Equal(t, Claims{
		1: {ClaimedAt: t0, JobName: "a"},
		2: {ClaimedAt: t0.Add(6 * time.Minute), JobName: "b-retry"},
	}, got)
}

// The stored format is read by the scaler of the previous version during an
// upgrade, and written by it: its key and field names must not follow
// renames in the Go code.
func TestStoredFormatIsThePreviousVersions(t *testing.T) {
	stored := `{"spawned":{"7":{"spawnedAt":"2026-11-21T12:00:00Z","jobName":"rg-abcde"}},"version":1}`
	claims := Claims{7: {ClaimedAt: t0, JobName: "rg-abcde"}}

	got, err := Decode(map[string]string{"spawned.json": stored})
	require.NoError(t, err)
	assert.Equal(t, claims, got)
	assert.JSONEq(t, stored, Encode(claims)["spawned.json"])
}

// The sightings of runners at work ride in the same document: a state
// written before them reads as none, sightings that make no sense are
// dropped without distrusting the claims, and the newest MaxClaims are kept.
func TestSightingsAtWork(t *testing.T) {
	claims := `"spawned":{"7":{"spawnedAt":"2026-11-21T12:00:00Z","jobName":"rg-abcde"}}`
	tests := []struct {
		name   string
		stored string
		want   AtWork
	}{
		{"written before sightings", `{"version":1,` + claims + `}`, AtWork{}},
		{"one sighting", `{"version":1,` + claims + `,"atWork":{"uid-a":"2026-11-21T12:00:00Z"}}`, AtWork{"uid-a": t0}},
		{"not a map", `{"version":1,` + claims + `,"atWork":5}`, AtWork{}},
		{"a time that is not one", `{"version":1,` + claims + `,"atWork":{"uid-a":"soon"}}`, AtWork{}},
		{"no time, or no UID", `{"version":1,` + claims + `,"atWork":{"uid-a":"0001-01-01T00:00:00Z","":"2026-11-21T12:00:00Z","uid-b":"2026-11-21T12:00:00Z"}}`, AtWork{"uid-b": t0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, atWork, err := decode(map[string]string{DataKey: tt.stored})
			require.NoError(t, err)
			assert.Equal(t, Claims{7: {ClaimedAt: t0, JobName: "rg-abcde"}}, got, "the claims stand")
			assert.Equal(t, tt.want, atWork)
		})
	}

	many := AtWork{}
	for i := range MaxClaims + 10 {
		many[types.UID("uid-"+strconv.Itoa(i))] = t0.Add(time.Duration(i) * time.Second)
	}
	_, atWork, err := decode(encode(Claims{}, many))
	require.NoError(t, err)
	assert.Len(t, atWork, MaxClaims)
	assert.NotContains(t, atWork, types.UID("uid-0"), "the oldest sightings go first")
	assert.Contains(t, atWork, types.UID("uid-"+strconv.Itoa(MaxClaims+9)))
}
