//go:build e2e

// The namespace dimension of the scale benchmark (issue 23): G groups
// spread over N namespaces, each with its token Secret, served two ways
// on the bed's real API server through the counting proxy (the figures
// measured against the naive design, before its code path was removed,
// stay in the reliability docs):
//
//   - cronjob: a single pass;
//   - loop:    one `run --loop` process (the Deployment), with its watch
//     caches; its first pass includes starting them.
//   - cronjob-wide, loop-wide: the same with --cluster-wide-reads (the
//     chart's scaler.clusterWideReads): one list, or one watch, of each
//     kind for the cluster instead of one per namespace. These run as the
//     chart's own ServiceAccount (the proxy impersonates it), installed
//     with the value, every namespace enabled with the tenant RoleBinding
//     the enable command makes: its rights come from one read of those
//     RoleBindings, where an admin would be reviewed in every namespace.
//     cronjob and loop run with the bed's admin credentials, which hold
//     every namespace's tenant rights: reviewed in each namespace either
//     way.
//
// For each it prints the first pass (every group new: a state ConfigMap
// and a status each) and a steady pass (nothing to create, nothing
// changed): Gitea requests, Kubernetes reads (watch requests apart) and
// writes, wall time and the process's peak RSS, and the steady pass's
// requests by verb and resource. BENCH_NS_BEFORE=PATH runs every mode
// first with the scaler built at PATH (an older build), and then the
// bed's takes its scene over (nsRuns), so one run prints the change's
// figures and today's side by side. Nothing here asserts a time; it fails
// when a steady pass writes what it should not, or when a steady loop
// pass reads anything but its watches.

package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea/giteatest"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// nsCase is one point of the namespace matrix.
type nsCase struct{ groups, namespaces int }

func (c nsCase) String() string { return fmt.Sprintf("G=%d N=%d", c.groups, c.namespaces) }

// nsBenchTargets and nsBenchJobs are the Gitea side, the same in every
// case: 10 orgs, 100 queued jobs no group can run.
const nsBenchTargets, nsBenchJobs = 10, 100

// nsMatrix is make bench's matrix (BENCH=full), or the e2e suite's smoke
// one. BENCH_NS=G/N,G/N picks cases.
func nsMatrix(full bool) []nsCase {
	if pick := os.Getenv("BENCH_NS"); pick != "" {
		var out []nsCase
		for _, p := range strings.Split(pick, ",") {
			var c nsCase
			if _, err := fmt.Sscanf(p, "%d/%d", &c.groups, &c.namespaces); err == nil {
				out = append(out, c)
			}
		}
		return out
	}
	if !full {
		return []nsCase{{20, 1}, {20, 10}}
	}
	return []nsCase{{500, 1}, {500, 10}, {500, 100}, {500, 500}, {5000, 10}, {5000, 100}, {5000, 500}}
}

// nsModes are the modes a case runs in: cronjob and loop, or those
// BENCH_NS_MODES=mode,mode picks (cronjob-wide and loop-wide too).
func nsModes() []string {
	if pick := os.Getenv("BENCH_NS_MODES"); pick != "" {
		return strings.Split(pick, ",")
	}
	return []string{"cronjob", "loop"}
}

// nsRun is one mode of a case, run by the bed's scaler or, when binary
// is set, by an older build. takeover says the run finds the scene the
// run before it served (and its state), as an upgrade of the scaler would.
type nsRun struct {
	mode, binary string
	takeover     bool
}

// nsRuns are the modes to run. With BENCH_NS_BEFORE, after the bed's
// build served a new scene, the older build takes the scene over, and then
// the bed's again, as upgrades of the scaler would: the two takeovers
// read the same objects and have nothing new to serve, so their steady
// passes and peaks compare, and the scene's first passes (minutes at 5,000
// groups on a loaded machine) run once per mode, at the bed's build's
// pace.
func nsRuns() []nsRun {
	before := os.Getenv("BENCH_NS_BEFORE")
	var out []nsRun
	for _, mode := range nsModes() {
		out = append(out, nsRun{mode: mode})
		if before != "" {
			out = append(out, nsRun{mode: mode, binary: before, takeover: true}, nsRun{mode: mode, takeover: true})
		}
	}
	return out
}

// requestTally counts every request through the API proxy by verb and
// resource (namespaces and names left out).
type requestTally struct {
	mu sync.Mutex
	n  requestCounts
}

// requestCounts are requests by "VERB resource".
type requestCounts map[string]int64

func (t *requestTally) add(r *http.Request) {
	verb := r.Method
	if isWatch(r.URL.RawQuery) {
		verb = "WATCH"
	} else if r.Method == http.MethodGet && isList(r.URL.Path) {
		verb = "LIST"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == nil {
		t.n = requestCounts{}
	}
	t.n[verb+" "+resourceOf(r.URL.Path)]++
}

// since is the tally now less before (a snapshot since returned).
func (t *requestTally) since(before requestCounts) requestCounts {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := requestCounts{}
	for k, v := range t.n {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// String lists the counts, largest first.
func (c requestCounts) String() string {
	keys := slices.Collect(maps.Keys(c))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(c[b], c[a]), cmp.Compare(a, b)) })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, c[k]))
	}
	return strings.Join(parts, " ")
}

// resourceOf is a request path's resource (with its subresource), its
// group version, namespace and name left out.
func resourceOf(path string) string {
	parts, ok := pastGroupVersion(path)
	if !ok {
		return path
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return "?"
	}
	if len(parts) >= 3 {
		return parts[0] + "/" + parts[2]
	}
	return parts[0]
}

// nsBenchEnv is what the scaler processes of the benchmark get: with
// BENCH_NS_PROFILE=DIR, a heap profile after each pass in
// DIR/<case>-<mode> (--bench-heap-profile); BENCH_NS_ARGS adds flags
// (space-separated) and BENCH_NS_ENV variables (e.g. GOMEMLIMIT=100MiB).
func nsBenchEnv(t *testing.T, c nsCase, mode string) (args, env []string) {
	t.Helper()
	if dir := os.Getenv("BENCH_NS_PROFILE"); dir != "" {
		dir = fmt.Sprintf("%s/%d-%d-%s", dir, c.groups, c.namespaces, mode)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		args = append(args, "--bench-heap-profile", dir)
	}
	return append(args, strings.Fields(os.Getenv("BENCH_NS_ARGS"))...), strings.Fields(os.Getenv("BENCH_NS_ENV"))
}

// nsBenchMemoryLimit is BENCH_NS_MEMORY_LIMIT (a quantity, e.g. 128Mi):
// the memory limit each mode's scaler runs under, in a memory cgroup of
// its own, as in a container with that limit; 0 when unset.
func nsBenchMemoryLimit(t *testing.T) int64 {
	t.Helper()
	v := os.Getenv("BENCH_NS_MEMORY_LIMIT")
	if v == "" {
		return 0
	}
	q, err := resource.ParseQuantity(v)
	require.NoError(t, err, "BENCH_NS_MEMORY_LIMIT=%q: want a quantity such as 128Mi", v)
	return q.Value()
}

// isWatch says a request is a watch (counted apart from reads).
func isWatch(q string) bool {
	return strings.Contains(q, "watch=true") || strings.Contains(q, "watch=1")
}

// isList says a GET of path reads a collection: /api/v1/R,
// /api/v1/namespaces/N/R, or the same under /apis/G/V.
func isList(path string) bool {
	parts, ok := pastGroupVersion(path)
	return ok && (len(parts) == 1 || (len(parts) == 3 && parts[0] == "namespaces"))
}

// pastGroupVersion is a request path's segments after /api/V or
// /apis/G/V; ok is false for a path of neither form.
func pastGroupVersion(path string) (parts []string, ok bool) {
	parts = strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		return parts[2:], true
	case len(parts) >= 3 && parts[0] == "apis":
		return parts[3:], true
	}
	return nil, false
}

// nsBenchPass is what one pass cost.
type nsBenchPass struct {
	wall                  time.Duration
	gitea                 int
	reads, watches, write int64
	// lists are the reads of whole collections.
	lists                int64
	statuses, configMaps int64
	rss                  int64
	// passRSS is a loop pass's own peak (VmRSS over the pass and the
	// wait before it), where rss is the process's since it started.
	passRSS int64
	// passAnon is the anonymous part of passRSS (RssAnon): Go's own
	// memory, without the executable's pages.
	passAnon int64
	// deferred says the pass left new groups to later passes.
	deferred bool
	// byKind counts the pass's requests by verb and resource.
	byKind requestCounts
}

func (p nsBenchPass) String() string {
	out := fmt.Sprintf("wall=%7.2fs gitea=%5d kube-reads=%6d (lists=%d) kube-writes=%6d (status=%d configmaps=%d) watches=%4d rss=%6.1fMiB",
		p.wall.Seconds(), p.gitea, p.reads, p.lists, p.write, p.statuses, p.configMaps, p.watches, float64(p.rss)/(1<<20))
	if p.passRSS > 0 {
		out += fmt.Sprintf(" pass-rss=%6.1fMiB pass-anon=%6.1fMiB", float64(p.passRSS)/(1<<20), float64(p.passAnon)/(1<<20))
	}
	return out
}

func TestBenchmarkNamespaces(t *testing.T) {
	// Alone on the bed: its figures must not measure other tests.
	e2e.Exclusive(t)
	full := os.Getenv("BENCH") == "full"
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, map[bool]time.Duration{true: 150 * time.Minute, false: 5 * time.Minute}[full])

	gt := giteatest.New()
	t.Cleanup(gt.Close)
	token := "bench-" + e2e.Uniq("token")
	gt.AddToken(token, "root", true)
	loadBenchScene(t, gt, benchCase{groups: nsBenchTargets, targets: nsBenchTargets, jobs: nsBenchJobs})
	// TLS and HTTP/2, as a cluster's API server: over HTTP/1.1 each of a
	// loop's watches would hold a connection of its own.
	api := b.NewTLSAPIProxy(t)
	kc := &kubeCount{}
	var watches, lists atomic.Int64
	tally := &requestTally{}
	api.Set(func(w http.ResponseWriter, r *http.Request, forward func(*http.Request) *httptest.ResponseRecorder) bool {
		tally.add(r)
		if isWatch(r.URL.RawQuery) {
			watches.Add(1)
			return false
		}
		if r.Method == http.MethodGet && isList(r.URL.Path) {
			lists.Add(1)
		}
		return kc.hook(w, r, forward)
	})
	kube, dyn := fastClients(t, b.Kubeconfig)
	// The release namespace, where the chart's listeners keep the
	// registration token checks' verdicts from one pass to the next.
	release := b.Namespace(ctx, t, "e2e-bench-release", nil)

	var chart *chartIdentity

	var report []string
	for _, c := range nsMatrix(full) {
		runs := nsRuns()
		var namespaces []string
		for i, run := range runs {
			mode, label := run.mode, run.mode
			if run.binary != "" {
				label += " before"
			}
			if run.takeover {
				label += " (takeover)"
			}
			if !run.takeover {
				namespaces = nsBenchScene(ctx, t, kube, dyn, gt.URL, token, c)
			}
			kubeconfig, checks := api.Kubeconfig, release+"/bench-registration-checks"
			var wide []string
			if strings.HasSuffix(mode, "-wide") {
				if chart == nil {
					chart = installChartIdentity(ctx, t, b, release, api.Kubeconfig)
				}
				if !run.takeover {
					chart.enable(ctx, t, kube, namespaces)
				}
				kubeconfig, checks = chart.kubeconfig, chart.registrationChecks
				wide = []string{"--cluster-wide-reads", "--tenant-cluster-role", chart.tenantRole, "--service-account", chart.serviceAccount}
			}
			args := append([]string{"--gitea-timeout", "10s", "--allowed-gitea-urls", gt.URL, "--registration-checks", checks}, wide...)
			more, env := nsBenchEnv(t, c, mode)
			o := e2e.PassOpts{Namespaces: namespaces, Kubeconfig: kubeconfig, Args: append(args, more...), Env: env, Deadline: 30 * time.Minute, Binary: run.binary}
			if limit := nsBenchMemoryLimit(t); limit > 0 {
				o.Memory = e2e.NewMemoryCgroup(t, limit)
			}
			var passes []nsBenchPass
			snap := func(wall time.Duration, rss int64, since nsBenchPass) nsBenchPass {
				return nsBenchPass{wall: wall, gitea: gt.RequestCount() - since.gitea,
					reads: kc.reads.Load() - since.reads, lists: lists.Load() - since.lists, write: kc.writes.Load() - since.write, watches: watches.Load() - since.watches,
					statuses: kc.statuses.Load() - since.statuses, configMaps: kc.configMaps.Load() - since.configMaps, rss: rss,
					byKind: tally.since(since.byKind)}
			}
			gt.ResetRequests()
			kc.reset()
			watches.Store(0)
			lists.Store(0)
			if strings.HasPrefix(mode, "loop") {
				passes = loopPasses(ctx, t, b, o, snap)
			} else {
				// Passes until one served the last new groups
				// (--kube-qps bounds the new groups per pass), then
				// the steady one after it.
				for deferring := true; deferring; {
					before := snap(0, 0, nsBenchPass{})
					res := b.Pass(ctx, t, o)
					require.Contains(t, []int{0}, res.Exit, "%s %s: the pass failed\n%s", c, mode, e2e.Redact(e2e.Tail(res.Log, 20)))
					p := snap(res.Took, res.PeakRSS, before)
					p.deferred = strings.Contains(res.Log, " deferred=")
					passes = append(passes, p)
					deferring = len(passes) < 2 || passes[len(passes)-2].deferred
					require.Less(t, len(passes), 20, "%s %s: new groups still deferred", c, mode)
				}
			}
			firsts := len(passes) - 1
			caseStart := len(report)
			report = append(report, fmt.Sprintf("%-12s %-30s first  %s (passes that served new groups: %d)", c, label, passes[0], firsts),
				fmt.Sprintf("%-12s %-30s steady %s", c, label, passes[firsts]),
				fmt.Sprintf("%-12s %-30s steady requests: %s", c, label, passes[firsts].byKind))
			if o.Memory != nil {
				report = append(report, fmt.Sprintf("%-12s %-30s %s", c, label, o.Memory.Report()))
			}
			// As it goes too: a long matrix stopped halfway keeps what it measured.
			t.Log(strings.Join(report[caseStart:], "\n"))
			steady := passes[firsts]
			assert.Zero(t, steady.configMaps, "%s %s: a steady pass writes no ConfigMap", c, mode)
			if strings.HasPrefix(mode, "loop") {
				// Its watch caches (the registrations ledgers come
				// with the state ConfigMaps'). It still gets the
				// Secrets and rights reviews whose trust ran out.
				assert.Zero(t, steady.lists, "%s %s: a steady pass lists nothing", c, mode)
			}
			if i+1 == len(runs) || !runs[i+1].takeover {
				dropNamespaces(ctx, t, kube, namespaces)
			}
		}
	}
	t.Log("namespace benchmark (" + map[bool]string{true: "full", false: "smoke"}[full] + "; the scaler's default --kube-qps, 4 workers):\n" + strings.Join(report, "\n"))
}

// chartIdentity is the chart installed with scaler.clusterWideReads in
// the release namespace, and a kubeconfig of the API proxy that acts as
// its ServiceAccount.
type chartIdentity struct {
	tenantRole, serviceAccount, user string
	registrationChecks, kubeconfig   string
}

// installChartIdentity installs the chart as a cluster-wide release whose
// own listeners serve nothing (the benchmark runs the passes).
func installChartIdentity(ctx context.Context, t *testing.T, b *e2e.Testbed, release, proxyKubeconfig string) *chartIdentity {
	t.Helper()
	values := e2e.BaseValues()
	values["scaler"].(map[string]any)["clusterWideReads"] = true
	values["defaultListener"] = map[string]any{"enabled": false}
	values["listeners"] = []any{map[string]any{
		"name":     "none",
		"selector": map[string]any{"matchLabels": map[string]any{"e2e.gitea.bpg.pw/bench": e2e.Uniq("none")}},
	}}
	rel := b.HelmInstall(ctx, t, release, "gro", values)
	sa := rel.Fullname()
	id := &chartIdentity{tenantRole: rel.Fullname() + "-" + release + "-tenant", serviceAccount: release + ":" + sa,
		user: "system:serviceaccount:" + release + ":" + sa, registrationChecks: release + "/" + rel.Fullname() + "-registration-checks"}
	// The proxy holds the bed's admin credentials, which may impersonate:
	// the API server then authorizes each request as the ServiceAccount
	// (with its groups, which it adds for a ServiceAccount's name).
	kc, err := clientcmd.LoadFromFile(proxyKubeconfig)
	require.NoError(t, err)
	for _, a := range kc.AuthInfos {
		a.Impersonate = id.user
	}
	id.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig-chart-sa")
	require.NoError(t, clientcmd.WriteToFile(*kc, id.kubeconfig))
	return id
}

// enable binds the tenant ClusterRole to the ServiceAccount in each
// namespace (as `gitea-runner-scaler enable-namespace` does), and waits
// until the API server's authorizer knows the last of them.
func (id *chartIdentity) enable(ctx context.Context, t *testing.T, kube kubernetes.Interface, namespaces []string) {
	t.Helper()
	ns, sa, _ := strings.Cut(id.serviceAccount, ":")
	parallel(t, len(namespaces), func(i int) error {
		_, err := kube.RbacV1().RoleBindings(namespaces[i]).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: id.tenantRole},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: id.tenantRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
		}, metav1.CreateOptions{})
		return err
	})
	last := namespaces[len(namespaces)-1]
	e2e.WaitUntil(ctx, t, e2e.StepWait, id.user+" may create Jobs in "+last, nil, func(ctx context.Context) (bool, string, error) {
		r, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: id.user, ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: last, Group: "batch", Resource: "jobs", Verb: "create"},
		}}, metav1.CreateOptions{})
		if err != nil {
			return false, "", err
		}
		return r.Status.Allowed, fmt.Sprintf("allowed=%v", r.Status.Allowed), nil
	})
}

// passFinished matches a pass's summary line.
var passFinished = regexp.MustCompile(`msg="pass finished[^"]*".* duration=(\S+).*`)

// loopPasses runs a looping scaler until it finished a pass after the
// last that deferred new groups, and returns every pass's cost, taken from
// the counters at each pass's summary line (the loop sends nothing
// between passes).
func loopPasses(ctx context.Context, t *testing.T, b *e2e.Testbed, o e2e.PassOpts, snap func(time.Duration, int64, nsBenchPass) nsBenchPass) []nsBenchPass {
	t.Helper()
	// A large install trusts a namespace's rights review for a while
	// (the default reviews every pass, one request per namespace).
	o.Args = append(o.Args, "--loop", "--interval", "3s", "--rights-recheck", "10m")
	run := b.StartPass(ctx, t, o)
	defer func() {
		_ = run.Cmd.Process.Signal(syscall.SIGTERM)
		res := run.Wait(t)
		e2e.RequireSanePass(t, res, "benchmark loop")
	}()
	var out []nsBenchPass
	last := snap(0, 0, nsBenchPass{})
	seen := 0
	done := func() bool { return len(out) >= 2 && !out[len(out)-2].deferred }
	for !done() {
		select {
		case <-ctx.Done():
			t.Fatalf("the loop did not finish two passes: %v\n%s", ctx.Err(), e2e.Redact(e2e.Tail(run.Out.String(), 20)))
		case <-run.Exited():
			// Killed by its memory limit, most likely: say so at once
			// rather than wait out the deadline for passes that never come.
			limit := "no memory limit"
			if o.Memory != nil {
				limit = o.Memory.Report()
			}
			t.Fatalf("the loop ended after %d passes (%s; peak rss %.1f MiB)\n%s", len(out), limit, float64(run.HWM.Load())/(1<<20), e2e.Redact(e2e.Tail(run.Out.String(), 20)))
		case <-time.After(10 * time.Millisecond):
		}
		m := passFinished.FindAllStringSubmatch(run.Out.String(), -1)
		for ; seen < len(m) && !done(); seen++ {
			d, err := time.ParseDuration(m[seen][1])
			require.NoError(t, err)
			p := snap(d, run.HWM.Load(), last)
			p.passRSS, p.passAnon = run.RSS.Swap(0), run.Anon.Swap(0)
			p.deferred = strings.Contains(m[seen][0], " deferred=")
			last = snap(0, 0, nsBenchPass{})
			out = append(out, p)
			require.Less(t, len(out), 20, "the loop still defers new groups")
		}
	}
	return out
}

// nsBenchScene makes c's namespaces, a token Secret in each and c's
// groups, group i in namespace i mod N serving org i mod 10.
func nsBenchScene(ctx context.Context, t *testing.T, kube kubernetes.Interface, dyn dynamic.Interface, giteaURL, token string, c nsCase) []string {
	t.Helper()
	namespaces := make([]string, c.namespaces)
	e2e.Secrets.Add(token)
	parallel(t, c.namespaces, func(i int) error {
		ns, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-bench-ns-",
			Labels: map[string]string{"gitea.bpg.pw/e2e": "true", tenancy.LabelEnforce: tenancy.LevelPrivileged}}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		namespaces[i] = ns.Name
		_, err = kube.CoreV1().Secrets(ns.Name).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "bench-tokens", Labels: map[string]string{tenancy.SecretLabel: "true"}, Annotations: map[string]string{
				tenancy.AnnotationRegistrationKeys: "registration", tenancy.AnnotationAPIKeys: "api", tenancy.AnnotationMintKeys: "api",
			}},
			StringData: map[string]string{"registration": "bench-registration", "api": token},
		}, metav1.CreateOptions{})
		return err
	})
	t.Cleanup(func() {
		ctx, cancel := e2e.CleanupContext()
		defer cancel()
		dropNamespaces(ctx, t, kube, namespaces)
	})
	off := false
	parallel(t, c.groups, func(i int) error {
		ns := namespaces[i%c.namespaces]
		rg := &v1alpha1.RunnerGroup{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("g%04d", i), Namespace: ns},
			Spec: v1alpha1.RunnerGroupSpec{
				Scope: v1alpha1.ScopeOrg, Org: fmt.Sprintf("bench-%d", i%nsBenchTargets),
				Gitea: v1alpha1.GiteaSpec{URL: giteaURL}, Labels: []string{"bench-nobody"}, DefaultLabels: &off, MaxActiveRunners: 5,
				RegistrationToken: &v1alpha1.SecretKeySelector{SecretRef: v1alpha1.SecretRef{Name: "bench-tokens", Key: "registration"}},
				AuthToken:         v1alpha1.SecretKeySelector{SecretRef: v1alpha1.SecretRef{Name: "bench-tokens", Key: "api"}},
			},
		}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rg)
		if err != nil {
			return err
		}
		_, err = dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
		return err
	})
	return namespaces
}

// dropNamespaces deletes namespaces without waiting for them to go.
func dropNamespaces(ctx context.Context, t *testing.T, kube kubernetes.Interface, namespaces []string) {
	t.Helper()
	parallel(t, len(namespaces), func(i int) error {
		if namespaces[i] == "" {
			return nil
		}
		err := kube.CoreV1().Namespaces().Delete(ctx, namespaces[i], metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// parallel calls fn for 0..n-1 on 16 goroutines and fails the test with
// every error.
func parallel(t *testing.T, n int, fn func(i int) error) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	work := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				if err := fn(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}

// fastClients are admin clients for setting a large scene up quickly,
// apart from the bed's (which keep its default pace).
func fastClients(t *testing.T, kubeconfig string) (kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	cfg.QPS, cfg.Burst = 1000, 1000
	cfg.Timeout = 30 * time.Second
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	return kube, dyn
}
