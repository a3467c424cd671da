package scaler

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// verdicts are a loop's verdicts on its groups, kept across passes: on the
// spec alone (specChecks) and on the runner pod in its namespace (Pod
// Security and the runner config's rights; tenantChecks). Both build the
// group's runner Job, and building 5,000 of them twice was most of what a
// steady loop pass allocated. A verdict holds while the group's
// metadata.generation stays, which the API server moves on every change of
// the spec and on nothing else (a status patch does not), and for the pod
// while the namespace's UID and resourceVersion stay. Nothing else goes
// into a verdict: the scaler's own configuration is fixed for its life. A
// single pass (the CronJob) keeps none.
type verdicts struct {
	mu   sync.Mutex
	kept passKept[verdictKey, verdict]
	// judged counts, per kind, the verdicts made rather than remembered.
	judged [verdictKinds]int
}

// verdictKind is what a verdict is on.
type verdictKind int

const (
	specVerdict verdictKind = iota
	podVerdict
	verdictKinds
)

type verdictKey struct {
	group types.UID
	kind  verdictKind
}

// verdict is one judgement and what it was judged on.
type verdict struct {
	generation int64
	namespace  types.UID
	nsVersion  string
	// flavour is the runner pods' flavour a pod verdict chose.
	flavour v1alpha1.RunnerFlavour
	err     error
}

// turn starts a pass.
func (v *verdicts) turn() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.kept.turn()
}

// spec returns the verdict on rg's spec: the one remembered for its
// generation, or judge's answer, which it remembers.
func (v *verdicts) spec(rg *v1alpha1.RunnerGroup, judge func() error) error {
	_, err := v.judge(verdictKey{rg.UID, specVerdict}, verdict{generation: rg.Generation}, func() (v1alpha1.RunnerFlavour, error) {
		return "", judge()
	})
	return err
}

// pod returns the verdict on rg's runner pod in namespace ns: the one
// remembered for the same generation of the group and version of the
// namespace, or judge's answer, which it remembers: the flavour chosen,
// or why none.
func (v *verdicts) pod(rg *v1alpha1.RunnerGroup, ns *corev1.Namespace, judge func() (v1alpha1.RunnerFlavour, error)) (v1alpha1.RunnerFlavour, error) {
	return v.judge(verdictKey{rg.UID, podVerdict}, verdict{generation: rg.Generation, namespace: ns.UID, nsVersion: ns.ResourceVersion}, judge)
}

// judge returns the verdict remembered under key for the same versions
// as on, or judge's answer, which it remembers. Objects without a
// generation or resourceVersion (only fakes have none) are judged every
// time.
func (v *verdicts) judge(key verdictKey, on verdict, judge func() (v1alpha1.RunnerFlavour, error)) (v1alpha1.RunnerFlavour, error) {
	keep := on.generation != 0 && (key.kind != podVerdict || on.nsVersion != "")
	v.mu.Lock()
	if keep {
		if got, ok := v.kept.get(key, func(got verdict) bool { return sameVersions(got, on) }); ok {
			v.mu.Unlock()
			return got.flavour, got.err
		}
	}
	v.judged[key.kind]++
	v.mu.Unlock()
	on.flavour, on.err = judge()
	if keep {
		v.mu.Lock()
		v.kept.keep(key, on)
		v.mu.Unlock()
	}
	return on.flavour, on.err
}

func sameVersions(a, b verdict) bool {
	return a.generation == b.generation && a.namespace == b.namespace && a.nsVersion == b.nsVersion
}
