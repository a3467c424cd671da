package runnerlabels

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// FuzzCanRun checks Gitea's matching rule against its definition: a job
// runs on a runner exactly when it has labels and every one of them is one
// of the runner's label names; and a runner label's image part never
// matters.
func FuzzCanRun(f *testing.F) {
	f.Add("ubuntu-latest:docker://img,gpu", "ubuntu-latest")
	f.Add("linux:host", "linux,gpu")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, runner, job string) {
		runnerLabels := strings.Split(runner, ",")
		jobLabels := strings.FieldsFunc(job, func(r rune) bool { return r == ',' })
		set := NewSet(runnerLabels)
		want := len(jobLabels) > 0
		for _, l := range jobLabels {
			found := false
			for _, r := range runnerLabels {
				found = found || Name(r) == l
			}
			want = want && found
		}
		assert.Equal(t, want, set.CanRun(jobLabels), "runner %q, job %q", runner, job)

		names := make([]string, len(runnerLabels))
		for i, r := range runnerLabels {
			names[i] = Name(r)
		}
		assert.Equal(t, set.CanRun(jobLabels), NewSet(names).CanRun(jobLabels), "the image part must not matter")
	})
}
