package scaler

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// podVerdicts are a loop's verdicts on its groups' runner pods (Pod
// Security and the runner config's rights; tenantChecks), kept across
// passes. A verdict depends only on the group, its namespace and the
// scaler's own configuration, so it is judged again only when the group's
// or the namespace's resourceVersion moved. Building every group's runner
// Job to judge it was over half of what a steady loop pass allocated at
// 5,000 groups (issue 23). A single pass (the CronJob) keeps none.
type podVerdicts struct {
	mu sync.Mutex
	// cur holds the verdicts used in this pass, prev those of the last:
	// a verdict no pass used goes after one more (a deleted group's).
	cur, prev map[types.UID]podVerdict
	// judged counts the verdicts made rather than remembered.
	judged int
}

type podVerdict struct {
	group, namespace, nsVersion string
	err                         error
}

// turn starts a pass.
func (v *podVerdicts) turn() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.prev, v.cur = v.cur, map[types.UID]podVerdict{}
}

// judge returns the verdict on rg's runner pod in namespace ns: the one
// remembered for the same versions of both, or judge's answer, which it
// remembers. Objects without a resourceVersion (only fakes have none) are
// judged every time.
func (v *podVerdicts) judge(rg *v1alpha1.RunnerGroup, ns *corev1.Namespace, judge func() error) error {
	key := podVerdict{group: rg.ResourceVersion, namespace: string(ns.UID), nsVersion: ns.ResourceVersion}
	v.mu.Lock()
	if v.cur == nil {
		v.cur = map[types.UID]podVerdict{}
	}
	for _, m := range []map[types.UID]podVerdict{v.cur, v.prev} {
		if got, ok := m[rg.UID]; ok && key.group != "" && key.nsVersion != "" && sameVersions(got, key) {
			v.cur[rg.UID] = got
			v.mu.Unlock()
			return got.err
		}
	}
	v.judged++
	v.mu.Unlock()
	key.err = judge()
	v.mu.Lock()
	v.cur[rg.UID] = key
	v.mu.Unlock()
	return key.err
}

func sameVersions(a, b podVerdict) bool {
	return a.group == b.group && a.namespace == b.namespace && a.nsVersion == b.nsVersion
}
