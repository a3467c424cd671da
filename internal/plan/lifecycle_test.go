package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
)

var lt0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

// caseTimeout is a table case's idle timeout: 10 minutes when it sets
// none, and off (0) when it sets a negative one.
func caseTimeout(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return 10 * time.Minute
	case d < 0:
		return 0
	}
	return d
}

func TestReapIdle(t *testing.T) {
	old := func(job string, minutes int) IdleRunner {
		return IdleRunner{Job: job, Since: lt0.Add(-time.Duration(minutes) * time.Minute)}
	}
	tests := []struct {
		name string
		in   IdleInput
		want []string
	}{
		{name: "no surplus: every idle runner is wanted", in: IdleInput{Surplus: 0, Runners: []IdleRunner{old("a", 60)}}},
		{name: "surplus, idle past the timeout", in: IdleInput{Surplus: 1, Runners: []IdleRunner{old("a", 11)}}, want: []string{"a"}},
		{name: "exactly at the timeout", in: IdleInput{Surplus: 1, Runners: []IdleRunner{old("a", 10)}}, want: []string{"a"}},
		{name: "surplus, idle for less than the timeout", in: IdleInput{Surplus: 1, Runners: []IdleRunner{old("a", 9)}}},
		{name: "no more than the surplus, longest idle first", in: IdleInput{Surplus: 2, Runners: []IdleRunner{old("a", 11), old("b", 30), old("c", 20)}}, want: []string{"b", "c"}},
		{name: "a surplus of starting runners reaps only the idle ones due", in: IdleInput{Surplus: 3, Runners: []IdleRunner{old("a", 11)}}, want: []string{"a"}},
		{name: "the warm pool keeps MinIdle", in: IdleInput{Surplus: 2, MinIdle: 1, Runners: []IdleRunner{old("a", 11), old("b", 12)}}, want: []string{"b"}},
		{name: "a warm pool as large as the surplus keeps all", in: IdleInput{Surplus: 2, MinIdle: 2, Runners: []IdleRunner{old("a", 11), old("b", 12)}}},
		{name: "the warm pool keeps its only ready runner while another starts", in: IdleInput{Surplus: 2, MinIdle: 1, Runners: []IdleRunner{old("a", 11)}}},
		{name: "the demand keeps a ready runner before a starting one", in: IdleInput{Surplus: 1, Demand: 1, Runners: []IdleRunner{old("a", 11)}}},
		{name: "ready runners beyond the demand and the pool go, though others start", in: IdleInput{Surplus: 3, MinIdle: 1, Demand: 1, Runners: []IdleRunner{old("a", 11), old("b", 12), old("c", 13)}}, want: []string{"c"}},
		{name: "timeout 0 turns reaping off", in: IdleInput{Surplus: 1, Timeout: -1, Runners: []IdleRunner{old("a", 60)}}},
		{name: "same age: by name, so racing passes pick the same", in: IdleInput{Surplus: 1, Runners: []IdleRunner{old("b", 11), old("a", 11)}}, want: []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.Now, in.Timeout = lt0, caseTimeout(in.Timeout)
			got := ReapIdle(in)
			if len(tt.want) == 0 {
				assert.Empty(t, got)
				return
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestIdleSince(t *testing.T) {
	created := lt0.Add(-time.Hour)
	tests := []struct {
		name string
		last time.Time
		want time.Time
	}{
		{"never seen at work: since its Job was made", time.Time{}, created},
		{"seen at work: since then", lt0.Add(-time.Minute), lt0.Add(-time.Minute)},
		{"a sighting before its Job was made", created.Add(-time.Minute), created},
		{"a sighting a little ahead of now: another node's clock", lt0.Add(ClockSkew), lt0.Add(ClockSkew)},
		{"a sighting far ahead of now: none", lt0.Add(ClockSkew + time.Second), created},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, IdleSince(created, tt.last, lt0))
		})
	}
}

func TestKeepAtWork(t *testing.T) {
	ago := func(d time.Duration) time.Time { return lt0.Add(-d) }
	tests := []struct {
		name    string
		in      AtWorkInput
		want    state.AtWork
		wantDue bool
	}{
		{name: "nothing seen: no write", in: AtWorkInput{Kept: state.AtWork{"a": ago(time.Hour)}, Active: []types.UID{"a"}}},
		{name: "seen, none kept: due", in: AtWorkInput{Seen: []types.UID{"a"}, Active: []types.UID{"a"}},
			want: state.AtWork{"a": lt0}, wantDue: true},
		{name: "kept less than half the timeout ago: not due", in: AtWorkInput{Kept: state.AtWork{"a": ago(4 * time.Minute)}, Seen: []types.UID{"a"}, Active: []types.UID{"a"}}},
		{name: "kept half the timeout ago: due", in: AtWorkInput{Kept: state.AtWork{"a": ago(5 * time.Minute)}, Seen: []types.UID{"a"}, Active: []types.UID{"a"}},
			want: state.AtWork{"a": lt0}, wantDue: true},
		{name: "a due write keeps the others still active and drops the gone", in: AtWorkInput{
			Kept: state.AtWork{"idle": ago(3 * time.Minute), "gone": ago(time.Minute)}, Seen: []types.UID{"new"}, Active: []types.UID{"idle", "new"}},
			want: state.AtWork{"idle": ago(3 * time.Minute), "new": lt0}, wantDue: true},
		{name: "reaping off: none kept", in: AtWorkInput{Timeout: -1, Seen: []types.UID{"a"}, Active: []types.UID{"a"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.Now, in.Timeout = lt0, caseTimeout(in.Timeout)
			got, due := KeepAtWork(in)
			assert.Equal(t, tt.wantDue, due)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestStuckRunners(t *testing.T) {
	at := func(minutes int) time.Time { return lt0.Add(-time.Duration(minutes) * time.Minute) }
	pull := StartingRunner{Job: "a", Created: at(11), Reason: "ErrImagePull", Message: "pull access denied"}
	tests := []struct {
		name    string
		timeout time.Duration
		runners []StartingRunner
		want    []Stuck
	}{
		{name: "not started after the timeout", timeout: 10 * time.Minute, runners: []StartingRunner{pull},
			want: []Stuck{{Job: "a", Reason: "ErrImagePull", Message: "pull access denied"}}},
		{name: "not started, within the timeout", timeout: 10 * time.Minute, runners: []StartingRunner{{Job: "a", Created: at(9), Reason: "Unschedulable"}}},
		{name: "started: its pod ran", timeout: 10 * time.Minute, runners: []StartingRunner{{Job: "a", Created: at(60), Started: true}}},
		{name: "registered with Gitea", timeout: 10 * time.Minute, runners: []StartingRunner{{Job: "a", Created: at(60), Registered: true}}},
		{name: "no pod at all (FailedCreate), oldest first", timeout: 10 * time.Minute, runners: []StartingRunner{
			pull, {Job: "b", Created: at(30), Reason: "FailedCreate", Message: `pods "b-x" is forbidden: exceeded quota`},
		}, want: []Stuck{{Job: "b", Reason: "FailedCreate", Message: `pods "b-x" is forbidden: exceeded quota`}, {Job: "a", Reason: "ErrImagePull", Message: "pull access denied"}}},
		{name: "timeout 0 frees none", timeout: 0, runners: []StartingRunner{pull}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := StuckRunners(lt0, tt.timeout, tt.runners)
			if len(tt.want) == 0 {
				assert.Empty(t, got)
				return
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestOrphans(t *testing.T) {
	orphan := Registration{ID: 1, Name: "ci-aaaaa-1234abcd", Job: "ci-aaaaa", Ephemeral: true}
	with := func(change func(*Registration)) Registration {
		r := orphan
		change(&r)
		return r
	}
	tests := []struct {
		name   string
		reg    Registration
		listed bool
		want   bool
	}{
		{name: "ours, ephemeral, its Job gone, offline, idle", reg: orphan, want: true},
		{name: "its Job is listed", reg: orphan, listed: true},
		{name: "online: its process may still run or be registering now", reg: with(func(r *Registration) { r.Online = true })},
		{name: "running a job", reg: with(func(r *Registration) { r.Busy = true })},
		{name: "not ephemeral", reg: with(func(r *Registration) { r.Ephemeral = false })},
		{name: "not ours: another group, another namespace's group of our name, or a runner we did not name", reg: with(func(r *Registration) { r.Job = "" })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Orphans([]Registration{tt.reg}, map[string]bool{"ci-aaaaa": tt.listed})
			if tt.want {
				assert.Equal(t, []Registration{tt.reg}, got)
			} else {
				assert.Empty(t, got)
			}
		})
	}
}

func TestLeftBehind(t *testing.T) {
	reg := func(id int64, group, tag string, online, busy bool) Named {
		return Named{Registration: Registration{ID: id, Name: group + "-x-" + tag, Ephemeral: true, Online: online, Busy: busy}, Group: group, Tag: tag}
	}
	tests := []struct {
		name       string
		in         LeftBehindInput
		wantIDs    []int64
		wantForget []string
	}{
		{name: "a deleted group's offline runner goes, and its tag once none is left",
			in:      LeftBehindInput{Regs: []Named{reg(1, "ci", "aaaa", false, false)}, Recorded: map[string]string{"aaaa": "ci"}, Live: map[string]string{}},
			wantIDs: []int64{1}, wantForget: []string{"aaaa"}},
		{name: "a group deleted and made again: the old tag's runner goes",
			in:      LeftBehindInput{Regs: []Named{reg(1, "ci", "aaaa", false, false)}, Recorded: map[string]string{"aaaa": "ci"}, Live: map[string]string{"ci": "bbbb"}},
			wantIDs: []int64{1}, wantForget: []string{"aaaa"}},
		{name: "a live group's runner stays",
			in: LeftBehindInput{Regs: []Named{reg(1, "ci", "aaaa", false, false)}, Recorded: map[string]string{"aaaa": "ci"}, Live: map[string]string{"ci": "aaaa"}}},
		{name: "a group that cannot be read lives",
			in: LeftBehindInput{Regs: []Named{reg(1, "ci", "aaaa", false, false)}, Recorded: map[string]string{"aaaa": "ci"}, Live: map[string]string{"ci": ""}}},
		{name: "a tag not in this namespace's ledger is another namespace's or install's",
			in: LeftBehindInput{Regs: []Named{reg(1, "ci", "cccc", false, false)}, Recorded: map[string]string{"aaaa": "ci"}, Live: map[string]string{"ci": "aaaa"}}},
		{name: "a recorded tag under another group's name is not that group's",
			in:         LeftBehindInput{Regs: []Named{reg(1, "web", "aaaa", false, false)}, Recorded: map[string]string{"aaaa": "ci"}, Live: map[string]string{}},
			wantForget: []string{"aaaa"}},
		{name: "online or busy runners stay, and keep the tag",
			in: LeftBehindInput{Regs: []Named{reg(1, "ci", "aaaa", true, false), reg(2, "ci", "aaaa", false, true)},
				Recorded: map[string]string{"aaaa": "ci"}, Live: map[string]string{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			remove, forget := LeftBehind(tt.in)
			var ids []int64
			for _, r := range remove {
				ids = append(ids, r.ID)
			}
			assert.Equal(t, tt.wantIDs, ids)
			assert.Equal(t, tt.wantForget, forget)
		})
	}
}

func TestStillAtWork(t *testing.T) {
	created := lt0.Add(-time.Hour)
	tests := []struct {
		name    string
		last    time.Time
		timeout time.Duration
		want    bool
	}{
		{"never seen at work", time.Time{}, 10 * time.Minute, false},
		{"seen a minute ago", lt0.Add(-time.Minute), 10 * time.Minute, true},
		{"seen just under the timeout ago", lt0.Add(-10*time.Minute + time.Second), 10 * time.Minute, true},
		{"seen the timeout ago", lt0.Add(-10 * time.Minute), 10 * time.Minute, false},
		{"a sighting before its Job was made", created.Add(-time.Minute), 2 * time.Hour, false},
		{"a sighting far ahead of now", lt0.Add(2 * ClockSkew), 10 * time.Minute, false},
		{"the runners API off", lt0.Add(-time.Minute), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, StillAtWork(created, tt.last, lt0, tt.timeout))
		})
	}
}
