package cli

import (
	"errors"
	"fmt"
)

// KubeClientFlags say how fast, and how widely, the scaler reads the
// cluster.
type KubeClientFlags struct {
	// A steady pass costs about 4 requests per namespace and one per
	// token Secret (a rights review, the state ConfigMaps, the runner
	// Jobs, the Secret), and a status heartbeat per group every few
	// minutes: 500 namespaces need about 2,000, 10 s at 200/s, where
	// 50/s took 40 s of a CronJob pass's minute. The API server's Priority
	// and Fairness (on in every Kubernetes the chart installs on) is what
	// shields it from a busy client; this limit only keeps a scaler that
	// went wrong from sending without end. client-go's default of 5/s
	// would take minutes.
	KubeQPS   float64 `env:"SCALER_KUBE_QPS" default:"200" help:"Requests per second to the Kubernetes API, sustained."`
	KubeBurst int     `env:"SCALER_KUBE_BURST" default:"400" help:"Requests to the Kubernetes API that may be sent at once before --kube-qps paces them."`
	// The platform team's opt-in (the chart's scaler.clusterWideReads):
	// one read per pass for all namespaces instead of one per namespace
	// (scaler.Config.ClusterWideReads).
	ClusterWideReads bool `env:"SCALER_CLUSTER_WIDE_READS" help:"Read once per pass for all namespaces what is otherwise read per namespace, where the chart grants it cluster-wide (scaler.clusterWideReads): the runner Jobs, runner pods, state ConfigMaps and registrations ledgers (a loop: one watch of each; a single pass: one list of each; needs list, and for --loop watch, on Jobs, pods and ConfigMaps in all namespaces; a loop checks at start, a single pass by its list's answer), the rights check from the RoleBindings of --tenant-cluster-role and that role's rules, and the Namespace objects. A read that is refused falls back to one per namespace; only enabled namespaces are served, as without it."`
}

// validate checks the rate.
func (f *KubeClientFlags) validate() error {
	var errs []error
	if f.KubeQPS <= 0 {
		errs = append(errs, fmt.Errorf("--kube-qps must be positive, got %g", f.KubeQPS))
	}
	if f.KubeBurst < 1 {
		errs = append(errs, fmt.Errorf("--kube-burst must be at least 1, got %d", f.KubeBurst))
	}
	return errors.Join(errs...)
}

// firstWritesSeconds is how long the first writes of new groups may take
// in one pass: with the rest of the pass, well inside a CronJob pass's 100 s
// (the chart's activeDeadlineSeconds).
const firstWritesSeconds = 30

// firstWritesPerSecond is the write rate new groups are admitted for. A
// higher --kube-qps speeds the reads of a steady pass up, but whether the
// API server stores more than this each second depends on the cluster:
// 5,000 new groups in one pass (--kube-qps 200) took minutes on a loaded
// test bed, past the CronJob's deadline, where 1,500 took about 60 s.
const firstWritesPerSecond = 50

// newGroupsPerPass is how many new groups a pass serves: each writes one
// state ConfigMap (the typed client) and one status (the dynamic client,
// paced apart), so at --kube-qps Q (at most firstWritesPerSecond) a pass
// writes Q × firstWritesSeconds of each in that time.
func (f *KubeClientFlags) newGroupsPerPass() int {
	return max(1, int(min(f.KubeQPS, firstWritesPerSecond)*firstWritesSeconds))
}
