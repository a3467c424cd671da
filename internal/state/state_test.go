package state

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	in := Spawned{1: {SpawnedAt: t0, JobName: "rg-abcde"}, 42: {SpawnedAt: t0.Add(time.Minute), JobName: "rg-fghjk"}}
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
		want    Spawned
		wantErr string
	}{
		{name: "no data is an empty state", data: nil, want: Spawned{}},
		{name: "empty value is an empty state", data: map[string]string{DataKey: ""}, want: Spawned{}},
		{name: "garbage", data: map[string]string{DataKey: "{not json"}, wantErr: "cannot decode"},
		{name: "unknown version", data: map[string]string{DataKey: `{"version":9,"spawned":{}}`}, wantErr: "unknown format version 9"},
		{name: "bad id", data: map[string]string{DataKey: `{"version":1,"spawned":{"x":{"spawnedAt":"2026-11-21T12:00:00Z","jobName":"a"}}}`}, wantErr: `bad Gitea job id "x"`},
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
	in := Spawned{}
	for i := 1; i <= MaxEntries+10; i++ {
		in[int64(i)] = Entry{SpawnedAt: t0.Add(time.Duration(i) * time.Second), JobName: "j" + strconv.Itoa(i)}
	}
	out, err := Decode(Encode(in))
	require.NoError(t, err)
	assert.Len(t, out, MaxEntries)
	for i := 1; i <= 10; i++ {
		assert.NotContains(t, out, int64(i), "the oldest claims go first")
	}
	assert.Contains(t, out, int64(MaxEntries+10))
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
	assert.Equal(t, Spawned{
		1: {SpawnedAt: t0, JobName: "a"},
		2: {SpawnedAt: t0.Add(6 * time.Minute), JobName: "b-retry"},
	}, got)
}
