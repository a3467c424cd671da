//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// The contract's names, written out here rather than taken from the product's
// packages, so that a change there shows up as a failing test.
const (
	labelGroup      = "gitea.bpg.pw/runnergroup-name"
	labelManagedBy  = "gitea.bpg.pw/managed-by"
	labelGiteaJob   = "gitea.bpg.pw/gitea-job-id"
	labelListener   = "gitea.bpg.pw/listener"
	labelPool       = "testbed.gitea.bpg.pw/pool"
	stateDataKey    = "spawned.json"
	chartName       = "gitea-runner-operator"
	runnerContainer = "runner"

	// scalerImage ends in gitea-runner-scaler, which the test bed's agent
	// plays with the locally built bin/gitea-runner-scaler.
	scalerImage = "registry.e2e.invalid/gitea-runner-operator/gitea-runner-scaler"

	// e2eFieldManager owns what the tests apply and create.
	e2eFieldManager = "gitea-runner-operator-e2e"
	// restrictedLabel opts a namespace into the restricted-pods policy.
	restrictedLabel = "policies.gitea.bpg.pw/restricted"

	// pollEvery is how often a wait looks again.
	pollEvery = time.Second
	// stepWait bounds each wait for one step of a scenario.
	stepWait = 2 * time.Minute
	// apiPoll and apiWait pace the waits for the API server itself to catch
	// up with a write (a CRD's schema served, a policy type-checked or
	// enforced): that takes a moment, not a pass.
	apiPoll = 250 * time.Millisecond
	apiWait = 30 * time.Second
)

var (
	crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	vapGVR = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}
)

// ---------------------------------------------------------------- the bed

// bed is the test bed: clients, Gitea, helm and the files the agent writes.
type bed struct {
	root       string // repository root
	dir        string // TESTBED_DIR
	kubeconfig string
	kube       kubernetes.Interface
	dyn        dynamic.Interface
	mapper     *restmapper.DeferredDiscoveryRESTMapper
	gitea      *giteaAPI
	helmBin    string
	helmEnv    []string

	// warnKube is a client whose responses' warnings land in warnings.
	warnKube kubernetes.Interface
	warnings *warningLog
}

var (
	bedOnce sync.Once
	theBed  *bed
	bedErr  error
)

// getBed connects to the test bed once per test binary and makes sure the
// RunnerGroup CRD is installed. A bed that is down fails the test: these
// tests exist to run, and skipping would hide it.
func getBed(t *testing.T) *bed {
	t.Helper()
	bedOnce.Do(func() { theBed, bedErr = connectBed() })
	if bedErr != nil {
		t.Fatalf("test bed: %v", redact(bedErr.Error()))
	}
	return theBed
}

func connectBed() (*bed, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	dir := os.Getenv("TESTBED_DIR")
	if dir == "" {
		dir = filepath.Join(root, ".testbed")
	}
	b := &bed{root: root, dir: dir, kubeconfig: filepath.Join(dir, "kubeconfig")}
	if _, err := os.Stat(b.kubeconfig); err != nil {
		return nil, fmt.Errorf("no kubeconfig at %s (%v): run `scripts/testbed up` first, or set TESTBED_DIR", b.kubeconfig, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", b.kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 30 * time.Second
	cfg.QPS, cfg.Burst = 50, 100
	if b.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if b.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	b.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(b.kube.Discovery()))
	b.warnings = &warningLog{}
	wcfg := rest.CopyConfig(cfg)
	wcfg.WarningHandler = b.warnings
	if b.warnKube, err = kubernetes.NewForConfig(wcfg); err != nil {
		return nil, err
	}
	env, err := readEnvFile(filepath.Join(dir, "gitea.env"))
	if err != nil {
		return nil, err
	}
	if env["GITEA_URL"] == "" || env["GITEA_ADMIN_TOKEN"] == "" {
		return nil, fmt.Errorf("%s lacks GITEA_URL or GITEA_ADMIN_TOKEN", filepath.Join(dir, "gitea.env"))
	}
	secrets.add(env["GITEA_ADMIN_TOKEN"])
	b.gitea = &giteaAPI{url: strings.TrimRight(env["GITEA_URL"], "/"), adminToken: env["GITEA_ADMIN_TOKEN"], hc: &http.Client{Timeout: 30 * time.Second}}
	if err := b.findHelm(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := b.ensureCRD(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

func readEnvFile(path string) (map[string]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w (is the test bed up?)", path, err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			out[k] = v
		}
	}
	return out, nil
}

// findHelm asks scripts/install-helm.sh where helm is and which HELM_* env
// it needs (its own config and cache folders), instead of hard-coding them.
func (b *bed) findHelm() error {
	script := filepath.Join(b.root, "scripts", "install-helm.sh")
	cmd := exec.Command("bash", "-c", `set -e; eval "$("$1" --print-env)"; command -v helm; env | grep '^HELM_' || true`, "bash", script)
	cmd.Dir = b.root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%s --print-env: %v: %s", script, err, tail(stderr.String(), 20))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) == 0 || !filepath.IsAbs(lines[0]) {
		return fmt.Errorf("%s --print-env gave no helm on PATH: %q", script, out)
	}
	b.helmBin = lines[0]
	b.helmEnv = append(os.Environ(), "KUBECONFIG="+b.kubeconfig)
	b.helmEnv = append(b.helmEnv, lines[1:]...)
	return nil
}

// ensureCRD server-side applies crds/ and waits until the CRD is Established.
// The CRD is cluster-wide and shared with the other e2e tests (and anyone
// else on the bed), so every release here installs with crds.install=false
// and the CRD is never deleted: deleting it would delete every RunnerGroup.
func (b *bed) ensureCRD(ctx context.Context) error {
	raw, err := os.ReadFile(filepath.Join(b.root, "crds", "gitea.bpg.pw_runnergroups.yaml"))
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{}
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096).Decode(&obj.Object); err != nil {
		return fmt.Errorf("decode CRD: %w", err)
	}
	if _, err := b.dyn.Resource(crdGVR).Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: e2eFieldManager, Force: true}); err != nil {
		return fmt.Errorf("apply CRD: %w", err)
	}
	for {
		got, err := b.dyn.Resource(crdGVR).Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conds {
				if m, _ := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not Established: %v", obj.GetName(), ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// keep says whether E2E_KEEP asks to leave what a test made in place.
func keep() bool { return os.Getenv("E2E_KEEP") != "" }

// testContext bounds a whole test.
func testContext(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// cleanupContext is for t.Cleanup work, which must run even when the test's
// own context has expired.
func cleanupContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), time.Minute)
}

// ---------------------------------------------------------------- names

var runSuffix = func() string {
	var b [2]byte
	_, _ = rand.Read(b[:])
	return strconv.FormatInt(time.Now().Unix()%(36*36*36*36*36), 36) + fmt.Sprintf("%02x", b[:1])
}()

// uniq returns a name unique to this run: prefix, "-", a short suffix, then
// "-" and each of parts. Gitea keeps organisations, users and jobs across
// runs, so every name there must be new each time.
func uniq(prefix string, parts ...string) string {
	return strings.Join(append([]string{prefix, runSuffix}, parts...), "-")
}

// jobKey is a workflow job key unique to this run; the test runner's hold
// file "name-<key>" then holds exactly this job.
func jobKey(parts ...string) string {
	return strings.ReplaceAll(strings.Join(append(parts, runSuffix), "_"), "-", "_")
}

// ---------------------------------------------------------------- secrets

// secretSet holds every token the tests see, so dumps can redact them.
type secretSet struct {
	mu     sync.Mutex
	values []string
}

var secrets = &secretSet{}

func (s *secretSet) add(v string) {
	if len(v) < 6 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.values, v) {
		s.values = append(s.values, v)
	}
}

// redact replaces every known token in s.
func redact(s string) string {
	secrets.mu.Lock()
	defer secrets.mu.Unlock()
	for _, v := range secrets.values {
		s = strings.ReplaceAll(s, v, "<redacted>")
	}
	return s
}

// ---------------------------------------------------------------- warnings

// warningLog collects the warnings the API server sends back to
// bed.warnKube (Pod Security Admission warns about workload templates it
// would refuse as pods).
type warningLog struct {
	mu    sync.Mutex
	texts []string
}

func (w *warningLog) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.texts = append(w.texts, text)
}

// matching returns the warnings seen so far that contain sub.
func (w *warningLog) matching(sub string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, s := range w.texts {
		if strings.Contains(s, sub) {
			out = append(out, s)
		}
	}
	return out
}

// ---------------------------------------------------------------- waiting

// waitUntil polls cond every pollEvery until it reports done, for at most
// timeout. cond returns what it saw (for the failure message) and an error
// only for a broken invariant, which fails the test at once. On a timeout the
// test fails with the last state and the dump.
func waitUntil(ctx context.Context, t *testing.T, timeout time.Duration, what string, dump func() string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	waitEvery(ctx, t, pollEvery, timeout, what, dump, cond)
}

// waitEvery is waitUntil looking again every `every`.
func waitEvery(ctx context.Context, t *testing.T, every, timeout time.Duration, what string, dump func() string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		done, state, err := cond(ctx)
		if state != "" {
			last = state
		}
		if err != nil {
			t.Fatalf("%s: %v\nlast state: %s\n%s", what, redact(err.Error()), redact(last), dumpOf(dump))
		}
		if done {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s: not within %s\nlast state: %s\n%s", what, timeout, redact(last), dumpOf(dump))
		}
		select {
		case <-ctx.Done():
		case <-time.After(every):
		}
	}
}

// eventually waits for the API server to catch up with a write: it polls
// cond every apiPoll for at most apiWait. The error cond returns says what
// is still wrong; it only goes into the failure message.
func eventually(ctx context.Context, t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	waitEvery(ctx, t, apiPoll, apiWait, what, nil, func(ctx context.Context) (bool, string, error) {
		ok, err := cond(ctx)
		if err != nil {
			return ok, err.Error(), nil
		}
		return ok, "", nil
	})
}

func dumpOf(dump func() string) string {
	if dump == nil {
		return ""
	}
	return redact(dump())
}

// ---------------------------------------------------------------- Kubernetes

// namespace creates a namespace named prefix-<random>, with the labels on
// top of the e2e one, and deletes it (and so everything in it) when the test
// ends. It creates the default ServiceAccount at once: pods need it, and the
// controller that makes it may be slower than the scaler or the test.
func (b *bed) namespace(ctx context.Context, t *testing.T, prefix string, labels map[string]string) string {
	t.Helper()
	all := map[string]string{"gitea.bpg.pw/e2e": "true"}
	maps.Copy(all, labels)
	ns, err := b.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: all},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		if keep() {
			t.Logf("E2E_KEEP: leaving namespace %s", ns.Name)
			return
		}
		ctx, cancel := cleanupContext()
		defer cancel()
		if err := b.kube.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", ns.Name, err)
		}
	})
	_, err = b.kube.CoreV1().ServiceAccounts(ns.Name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	return ns.Name
}

// tokenSecret creates the Secret a RunnerGroup names: key "registration"
// holds the runner registration token, key "api" the API token.
func (b *bed) tokenSecret(ctx context.Context, t *testing.T, ns, name, registration, api string) {
	t.Helper()
	secrets.add(registration)
	secrets.add(api)
	_, err := b.kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		StringData: map[string]string{"registration": registration, "api": api},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// groupSpec is a RunnerGroup spec for the fixture's scope (its scope, org,
// user and repo) whose tokens are in the Secret made by tokenSecret.
func (b *bed) groupSpec(fx scopeFixture, secret string, max int32, labels ...string) v1alpha1.RunnerGroupSpec {
	return v1alpha1.RunnerGroupSpec{
		Scope:             fx.spec.Scope,
		Org:               fx.spec.Org,
		User:              fx.spec.User,
		Repo:              fx.spec.Repo,
		Gitea:             v1alpha1.GiteaSpec{URL: b.gitea.url},
		Labels:            labels,
		MaxActiveRunners:  max,
		RegistrationToken: v1alpha1.SecretKeySelector{SecretRef: v1alpha1.SecretRef{Name: secret, Key: "registration"}},
		AuthToken:         v1alpha1.SecretKeySelector{SecretRef: v1alpha1.SecretRef{Name: secret, Key: "api"}},
	}
}

func (b *bed) groups(ns string) dynamic.ResourceInterface {
	return b.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns)
}

func (b *bed) createGroup(ctx context.Context, t *testing.T, ns, name string, labels map[string]string, spec v1alpha1.RunnerGroupSpec) *v1alpha1.RunnerGroup {
	t.Helper()
	rg := &v1alpha1.RunnerGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec:       spec,
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rg)
	require.NoError(t, err)
	created, err := b.groups(ns).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	require.NoError(t, err, "create RunnerGroup %s/%s", ns, name)
	out := &v1alpha1.RunnerGroup{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(created.Object, out))
	return out
}

func (b *bed) group(ctx context.Context, ns, name string) (*v1alpha1.RunnerGroup, error) {
	got, err := b.groups(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	out := &v1alpha1.RunnerGroup{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, out); err != nil {
		return nil, err
	}
	return out, nil
}

// patchGroup merge-patches a RunnerGroup (its spec, as a user would).
func (b *bed) patchGroup(ctx context.Context, t *testing.T, ns, name string, patch map[string]any) *v1alpha1.RunnerGroup {
	t.Helper()
	raw, err := json.Marshal(patch)
	require.NoError(t, err)
	got, err := b.groups(ns).Patch(ctx, name, types.MergePatchType, raw, metav1.PatchOptions{})
	require.NoError(t, err)
	out := &v1alpha1.RunnerGroup{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, out))
	return out
}

func condition(rg *v1alpha1.RunnerGroup, typ string) *metav1.Condition {
	for i := range rg.Status.Conditions {
		if rg.Status.Conditions[i].Type == typ {
			return &rg.Status.Conditions[i]
		}
	}
	return nil
}

// statusLine is a RunnerGroup's status in one line, for failure messages.
func statusLine(rg *v1alpha1.RunnerGroup) string {
	if rg == nil {
		return "<none>"
	}
	s := rg.Status
	line := fmt.Sprintf("%s: gen=%d observed=%d active=%d queued=%d blocked=%d running=%d", rg.Name, rg.Generation, s.ObservedGeneration, s.ActiveRunners, s.QueuedJobs, s.BlockedJobs, s.RunningJobs)
	if s.LastCheckTime != nil {
		line += " lastCheck=" + s.LastCheckTime.UTC().Format(time.RFC3339)
	}
	for _, c := range s.Conditions {
		line += fmt.Sprintf(" %s=%s/%s(%q)", c.Type, c.Status, c.Reason, c.Message)
	}
	return line
}

// waitPasses waits until the group's status shows n more passes than now
// (lastCheckTime moved n times), so that a test can say "for several
// passes, this did not happen".
func (b *bed) waitPasses(ctx context.Context, t *testing.T, ns, name string, n int, dump func() string, check func(ctx context.Context) error) {
	t.Helper()
	var last time.Time
	seen := -1
	waitUntil(ctx, t, stepWait, fmt.Sprintf("%d more passes over RunnerGroup %s/%s", n, ns, name), dump, func(ctx context.Context) (bool, string, error) {
		if check != nil {
			if err := check(ctx); err != nil {
				return false, "", err
			}
		}
		rg, err := b.group(ctx, ns, name)
		if err != nil {
			return false, err.Error(), nil
		}
		if rg.Status.LastCheckTime == nil {
			return false, statusLine(rg), nil
		}
		if ts := rg.Status.LastCheckTime.Time; !ts.Equal(last) {
			last = ts
			seen++
		}
		return seen >= n, statusLine(rg), nil
	})
}

// runnerJobs lists a group's runner Jobs by the group label.
func (b *bed) runnerJobs(ctx context.Context, ns, group string) ([]batchv1.Job, error) {
	list, err := b.kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: labelGroup + "=" + group})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// jobPods lists the pods of a Job by the label the Job controller sets.
func (b *bed) jobPods(ctx context.Context, ns, job string) ([]corev1.Pod, error) {
	list, err := b.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// byGiteaJob groups runner Jobs by their gitea-job-id label.
func byGiteaJob(jobs []batchv1.Job) map[int64][]batchv1.Job {
	out := map[int64][]batchv1.Job{}
	for _, j := range jobs {
		id, _ := strconv.ParseInt(j.Labels[labelGiteaJob], 10, 64)
		out[id] = append(out[id], j)
	}
	return out
}

func jobCondition(j *batchv1.Job, typ batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// jobActive is the contract's "active runner": no Complete or Failed
// condition yet.
func jobActive(j *batchv1.Job) bool {
	return !jobCondition(j, batchv1.JobComplete) && !jobCondition(j, batchv1.JobFailed)
}

func jobState(j *batchv1.Job) string {
	switch {
	case jobCondition(j, batchv1.JobComplete):
		return "Complete"
	case jobCondition(j, batchv1.JobFailed):
		return "Failed"
	default:
		return "Active"
	}
}

func activeCount(jobs []batchv1.Job) int {
	n := 0
	for i := range jobs {
		if jobActive(&jobs[i]) {
			n++
		}
	}
	return n
}

func envOf(c corev1.Container, name string) (corev1.EnvVar, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e, true
		}
	}
	return corev1.EnvVar{}, false
}

// dumpNamespaces describes what a failure needs to be understood: the
// RunnerGroups, Jobs, pods, recent events and the listener logs' tails.
// Callers pass it through redact (waitUntil does).
func (b *bed) dumpNamespaces(namespaces ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var sb strings.Builder
	for _, ns := range namespaces {
		fmt.Fprintf(&sb, "---- namespace %s\n", ns)
		if list, err := b.groups(ns).List(ctx, metav1.ListOptions{}); err == nil {
			for _, item := range list.Items {
				rg := &v1alpha1.RunnerGroup{}
				if runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, rg) == nil {
					fmt.Fprintf(&sb, "RunnerGroup %s labels=%v max=%d\n  %s\n", rg.Name, rg.Spec.Labels, rg.Spec.MaxActiveRunners, statusLine(rg))
				}
			}
		}
		if list, err := b.kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{}); err == nil {
			for _, j := range list.Items {
				fmt.Fprintf(&sb, "Job %s gitea-job=%s %s created=%s active=%d succeeded=%d failed=%d\n", j.Name, j.Labels[labelGiteaJob], jobState(&j),
					j.CreationTimestamp.UTC().Format(time.RFC3339), j.Status.Active, j.Status.Succeeded, j.Status.Failed)
			}
		}
		if list, err := b.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
			for _, p := range list.Items {
				var states []string
				for _, cs := range p.Status.ContainerStatuses {
					st := "waiting"
					switch {
					case cs.State.Running != nil:
						st = "running"
					case cs.State.Terminated != nil:
						st = fmt.Sprintf("exit %d", cs.State.Terminated.ExitCode)
					case cs.State.Waiting != nil:
						st = cs.State.Waiting.Reason
					}
					states = append(states, fmt.Sprintf("%s=%s(restarts %d)", cs.Name, st, cs.RestartCount))
				}
				fmt.Fprintf(&sb, "Pod %s %s node=%s %s\n", p.Name, p.Status.Phase, p.Spec.NodeName, strings.Join(states, " "))
			}
		}
		if list, err := b.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
			evs := list.Items
			sort.Slice(evs, func(i, j int) bool { return evs[i].LastTimestamp.Before(&evs[j].LastTimestamp) })
			if len(evs) > 30 {
				evs = evs[len(evs)-30:]
			}
			for _, e := range evs {
				fmt.Fprintf(&sb, "Event %s %s/%s %s: %s\n", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
		files, _ := filepath.Glob(filepath.Join(b.dir, "logs", "pods", ns+"_*_listener.log"))
		for _, f := range files {
			raw, _ := os.ReadFile(f)
			fmt.Fprintf(&sb, "== %s (tail)\n%s\n", filepath.Base(f), tail(string(raw), 25))
		}
	}
	return sb.String()
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// podLog is what the agent wrote for one container of a pod.
func (b *bed) podLog(ns, pod, container string) string {
	raw, _ := os.ReadFile(filepath.Join(b.dir, "logs", "pods", fmt.Sprintf("%s_%s_%s.log", ns, pod, container)))
	return string(raw)
}

// ---------------------------------------------------------------- manifests

// readObjects reads every object of a (multi-document) YAML file. Numbers
// come out as int64, as the dynamic client returns them.
func readObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	docs := utilyaml.NewYAMLReader(bufio.NewReader(f))
	var out []*unstructured.Unstructured
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err, "reading %s", path)
		raw, err := utilyaml.ToJSON(doc)
		require.NoError(t, err, "decoding %s", path)
		if s := strings.TrimSpace(string(raw)); s == "" || s == "null" {
			continue // only comments
		}
		obj := &unstructured.Unstructured{}
		require.NoError(t, obj.UnmarshalJSON(raw), "decoding %s", path)
		out = append(out, obj)
	}
}

// readObject reads a file that holds exactly one object.
func readObject(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	objs := readObjects(t, path)
	require.Len(t, objs, 1, "%s holds one object", path)
	return objs[0]
}

// resource maps an object's kind to a resource client, refreshing
// discovery once when the kind is new (a CRD that just became Established).
func (b *bed) resource(t *testing.T, obj *unstructured.Unstructured) dynamic.ResourceInterface {
	t.Helper()
	gvk := obj.GroupVersionKind()
	m, err := b.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		b.mapper.Reset()
		m, err = b.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	require.NoError(t, err, "mapping %s", gvk)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return b.dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	}
	return b.dyn.Resource(m.Resource)
}

// apply server-side applies obj, taking over fields from other managers:
// the test bed is ours, and the manifests under test are the truth.
func (b *bed) apply(ctx context.Context, t *testing.T, obj *unstructured.Unstructured, dryRun bool) *unstructured.Unstructured {
	t.Helper()
	opts := metav1.ApplyOptions{FieldManager: e2eFieldManager, Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	out, err := b.resource(t, obj).Apply(ctx, obj.GetName(), obj, opts)
	require.NoError(t, err, "applying %s %s", obj.GetKind(), obj.GetName())
	return out
}

// applyKept applies obj and leaves it in place after the test, first
// waiting out an earlier deletion that is still running (a namespace takes
// a while), since applying into a terminating object fails.
func (b *bed) applyKept(ctx context.Context, t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	b.waitNotTerminating(ctx, t, obj)
	b.apply(ctx, t, obj, false)
}

// waitNotTerminating waits until obj either does not exist or is not being
// deleted.
func (b *bed) waitNotTerminating(ctx context.Context, t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	res := b.resource(t, obj)
	eventually(ctx, t, obj.GetKind()+" "+obj.GetName()+" not terminating", func(ctx context.Context) (bool, error) {
		cur, err := res.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return cur.GetDeletionTimestamp() == nil, fmt.Errorf("being deleted since %s", cur.GetDeletionTimestamp())
	})
}

// policyReady waits until the API server has type-checked a
// ValidatingAdmissionPolicy and then requires that no expression drew a
// warning: a warning means an expression names a field the matched kinds do
// not have, which at run time is an error and a refused request.
func (b *bed) policyReady(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	var status map[string]any
	eventually(ctx, t, "type checking of policy "+name, func(ctx context.Context) (bool, error) {
		got, err := b.dyn.Resource(vapGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		observed, _, _ := unstructured.NestedInt64(got.Object, "status", "observedGeneration")
		if observed != got.GetGeneration() {
			return false, fmt.Errorf("status.observedGeneration %d, generation %d (kube-controller-manager's "+
				"validatingadmissionpolicy-status-controller writes it: is it running?)", observed, got.GetGeneration())
		}
		status, _, _ = unstructured.NestedMap(got.Object, "status")
		return true, nil
	})
	warnings, _, _ := unstructured.NestedSlice(status, "typeChecking", "expressionWarnings")
	assert.Empty(t, warnings, "policy %s: type-checking warnings", name)
}

// ---------------------------------------------------------------- hold files

// hold keeps the Gitea job with this workflow job key in progress once a
// test runner takes it, until release (or the test's end) removes the file.
func (b *bed) hold(t *testing.T, key string) {
	t.Helper()
	dir := filepath.Join(b.dir, "hold")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	p := filepath.Join(dir, "name-"+key)
	require.NoError(t, os.WriteFile(p, nil, 0o644))
	t.Cleanup(func() { _ = os.Remove(p) })
}

func (b *bed) release(t *testing.T, keys ...string) {
	t.Helper()
	for _, key := range keys {
		if err := os.Remove(filepath.Join(b.dir, "hold", "name-"+key)); err != nil && !os.IsNotExist(err) {
			t.Fatalf("release hold %s: %v", key, err)
		}
	}
}

// ---------------------------------------------------------------- helm

// helmRelease is an installed helm release.
type helmRelease struct {
	name, ns string
}

// fullname is the chart's name for the release's objects.
func (r helmRelease) fullname() string { return r.name + "-" + chartName }

// baseValues are the values every release here starts from: the scaler
// image the agent plays, the shared CRD left alone, logs the tests read, and
// a spawn TTL short enough for a test yet far above a runner's start time.
func baseValues(watch ...string) map[string]any {
	return map[string]any{
		"image":           map[string]any{"repository": scalerImage},
		"crds":            map[string]any{"install": false},
		"watchNamespaces": watch,
		"scaler": map[string]any{
			"logFormat": "text",
			"logLevel":  "debug",
			"spawnTTL":  "1m",
		},
	}
}

// deploymentValues run the listener as a Deployment that passes every 2s.
func deploymentValues(watch ...string) map[string]any {
	v := baseValues(watch...)
	v["mode"] = "deployment"
	v["scaler"].(map[string]any)["interval"] = "2s"
	return v
}

func (b *bed) helm(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, b.helmBin, args...)
	cmd.Env = b.helmEnv
	cmd.Dir = b.root
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// valuesFile writes values to a file of the test, for helm's --values.
func valuesFile(t *testing.T, values map[string]any) string {
	t.Helper()
	raw, err := yaml.Marshal(values)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(file, raw, 0o600))
	return file
}

// helmInstall installs charts/gitea-runner-operator into ns with the values
// and fails the test if helm does.
func (b *bed) helmInstall(ctx context.Context, t *testing.T, ns, name string, values map[string]any) helmRelease {
	t.Helper()
	file := valuesFile(t, values)
	if out, err := b.tryHelmInstall(ctx, t, ns, name, file); err != nil {
		raw, _ := os.ReadFile(file)
		t.Fatalf("helm install %s -n %s: %v\n%s\nvalues:\n%s", name, ns, err, out, raw)
	}
	return helmRelease{name: name, ns: ns}
}

// tryHelmInstall runs `helm install <name> charts/gitea-runner-operator`
// into ns with the values files, in order, and returns helm's output
// (redacted) and error. The release is uninstalled when the test ends
// (before the namespace goes), also after a failed install, which leaves
// the objects created before the failure.
func (b *bed) tryHelmInstall(ctx context.Context, t *testing.T, ns, name string, valueFiles ...string) (string, error) {
	t.Helper()
	args := []string{"install", name, filepath.Join(b.root, "charts", chartName), "--namespace", ns}
	for _, f := range valueFiles {
		args = append(args, "--values", f)
	}
	t.Cleanup(func() {
		if keep() {
			return
		}
		ctx, cancel := cleanupContext()
		defer cancel()
		if out, err := b.helm(ctx, "uninstall", name, "--namespace", ns); err != nil && !strings.Contains(out, "not found") {
			t.Errorf("helm uninstall %s -n %s: %v\n%s", name, ns, err, redact(out))
		}
	})
	ictx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	out, err := b.helm(ictx, args...)
	return redact(out), err
}

// listenerPods lists the pods of one listener ("default" or a name from
// values.listeners) of a release.
func (b *bed) listenerPods(ctx context.Context, rel helmRelease, listener string) ([]corev1.Pod, error) {
	list, err := b.kube.CoreV1().Pods(rel.ns).List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/instance=" + rel.name + "," + labelListener + "=" + listener,
	})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// ---------------------------------------------------------------- serving

// served is what one Gitea job got: the runner Job that claims it (labelled
// with its id) and the runner Job whose runner took it. Gitea hands a queued
// job to any idle runner of matching labels in scope, so when two runners of
// a group start together, each may take the other's job: the promise is one
// runner per job, not a fixed pairing.
type served struct {
	gitea  giteaJob
	claim  batchv1.Job
	runner batchv1.Job
}

// servingState checks the promise for the Gitea jobs in ids against the
// group's runner Jobs: at most one runner Job claims each; a job taken by a
// runner is taken by one of the group's runner Jobs, each runner taking one
// job; and no job fails. It returns what each job got so far, whether every
// job has its claim and its runner, and a line describing the state.
func (b *bed) servingState(ctx context.Context, ns, group string, r repoRef, ids map[string]int64) (map[string]served, bool, string, error) {
	jobs, err := b.runnerJobs(ctx, ns, group)
	if err != nil {
		return nil, false, err.Error(), nil
	}
	gjobs, err := b.gitea.repoJobs(ctx, r)
	if err != nil {
		return nil, false, err.Error(), nil
	}
	current := map[int64]giteaJob{}
	for _, j := range gjobs {
		current[j.ID] = j
	}
	byName := map[string]batchv1.Job{}
	for _, j := range jobs {
		byName[j.Name] = j
	}
	claims := byGiteaJob(jobs)
	runners := map[string]string{}
	out := map[string]served{}
	all := true
	var state []string
	for k, id := range ids {
		gj := current[id]
		cj := claims[id]
		state = append(state, fmt.Sprintf("%s#%d=%s runner=%q claimed-by=%v", k, id, gj.state(), gj.RunnerName, jobNames(cj)))
		if len(cj) > 1 {
			return nil, false, "", fmt.Errorf("Gitea job %s (#%d) has %d runner Jobs: %v", k, id, len(cj), jobNames(cj))
		}
		if gj.Status == "completed" && gj.Conclusion != "success" {
			return nil, false, "", fmt.Errorf("Gitea job %s (#%d) ended %s", k, id, gj.state())
		}
		if len(cj) == 1 && jobCondition(&cj[0], batchv1.JobFailed) {
			return nil, false, "", fmt.Errorf("runner Job %s claiming Gitea job %s failed", cj[0].Name, k)
		}
		if gj.RunnerName != "" {
			if _, ok := byName[gj.RunnerName]; !ok {
				return nil, false, "", fmt.Errorf("Gitea job %s (#%d) was taken by runner %q, which is none of %s's runner Jobs %v", k, id, gj.RunnerName, group, jobNames(jobs))
			}
			if other, dup := runners[gj.RunnerName]; dup {
				return nil, false, "", fmt.Errorf("runner %s took two Gitea jobs, %s and %s", gj.RunnerName, other, k)
			}
			runners[gj.RunnerName] = k
		}
		if len(cj) == 0 || gj.RunnerName == "" {
			all = false
			continue
		}
		out[k] = served{gitea: gj, claim: cj[0], runner: byName[gj.RunnerName]}
	}
	sort.Strings(state)
	return out, all, strings.Join(state, "; "), nil
}

func idsOf(jobs map[string]giteaJob, keys ...string) map[string]int64 {
	out := map[string]int64{}
	for _, k := range keys {
		out[k] = jobs[k].ID
	}
	return out
}

// expectServed proves, for the Gitea jobs with these keys, the product's
// main promise: each gets exactly one runner Job of the group; a runner of
// the group registers under its Job's name and takes the job (held
// in_progress until then); and once released, the job ends in success and
// the runner Job completes. The keys must have been held (b.hold) before the
// workflow was pushed.
func (b *bed) expectServed(ctx context.Context, t *testing.T, ns, group string, r repoRef, keys []string, dump func() string) map[string]served {
	t.Helper()
	ids := idsOf(b.gitea.waitJobs(ctx, t, r, len(keys)), keys...)
	var out map[string]served
	waitUntil(ctx, t, stepWait, fmt.Sprintf("runners of %s taking each of %v in %s", group, keys, r), dump, func(ctx context.Context) (bool, string, error) {
		got, all, state, err := b.servingState(ctx, ns, group, r, ids)
		if err != nil || !all {
			return false, state, err
		}
		for _, s := range got {
			if s.gitea.Status != "in_progress" {
				return false, state, nil
			}
		}
		out = got
		return true, state, nil
	})
	for _, k := range keys {
		checkRunnerJob(t, ns, group, out[k])
		t.Logf("Gitea job %s (#%d): claimed by runner Job %s, in progress on runner %s", k, out[k].gitea.ID, out[k].claim.Name, out[k].runner.Name)
	}
	b.release(t, keys...)
	return b.expectCompleted(ctx, t, ns, group, r, ids, dump)
}

// expectCompleted waits until each Gitea job (by key) ended in success on a
// runner of the group, claimed by exactly one runner Job, and the runner
// Jobs involved are Complete. A broken promise fails the test at once.
func (b *bed) expectCompleted(ctx context.Context, t *testing.T, ns, group string, r repoRef, ids map[string]int64, dump func() string) map[string]served {
	t.Helper()
	var out map[string]served
	waitUntil(ctx, t, stepWait, fmt.Sprintf("Gitea jobs of %s in %s succeeded on its runners", group, r), dump, func(ctx context.Context) (bool, string, error) {
		got, all, state, err := b.servingState(ctx, ns, group, r, ids)
		if err != nil || !all {
			return false, state, err
		}
		for _, s := range got {
			if s.gitea.state() != "completed/success" || !jobCondition(&s.claim, batchv1.JobComplete) || !jobCondition(&s.runner, batchv1.JobComplete) {
				return false, state, nil
			}
		}
		out = got
		return true, state, nil
	})
	return out
}

func jobNames(jobs []batchv1.Job) []string {
	out := make([]string, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, j.Name)
	}
	sort.Strings(out)
	return out
}

// checkRunnerJob checks a runner Job's shape against the contract.
func checkRunnerJob(t *testing.T, ns, group string, s served) {
	t.Helper()
	j := s.claim
	require.Regexp(t, `^`+group+`-[bcdfghjklmnpqrstvwxz2456789]{5}$`, j.Name, "runner Job name")
	require.Equal(t, ns, j.Namespace)
	require.Equal(t, group, j.Labels[labelGroup])
	require.Equal(t, "gitea-runner-operator", j.Labels[labelManagedBy])
	require.Equal(t, strconv.FormatInt(s.gitea.ID, 10), j.Labels[labelGiteaJob])
	ref := metav1.GetControllerOf(&j)
	require.NotNil(t, ref, "runner Job %s has no controller", j.Name)
	require.Equal(t, v1alpha1.Kind, ref.Kind)
	require.Equal(t, group, ref.Name)
	pod := j.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	require.Equal(t, runnerContainer, c.Name)
	name, ok := envOf(c, "GITEA_RUNNER_NAME")
	require.True(t, ok)
	require.Equal(t, j.Name, name.Value)
	eph, _ := envOf(c, "GITEA_RUNNER_EPHEMERAL")
	require.Equal(t, "true", eph.Value)
	reg, ok := envOf(c, "GITEA_RUNNER_REGISTRATION_TOKEN")
	require.True(t, ok)
	require.Empty(t, reg.Value, "the registration token must come from a secretKeyRef, not a value")
	require.NotNil(t, reg.ValueFrom)
	require.NotNil(t, reg.ValueFrom.SecretKeyRef)
	labels, _ := envOf(c, "GITEA_RUNNER_LABELS")
	for _, l := range s.gitea.Labels {
		require.Contains(t, strings.Split(labels.Value, ","), l, "GITEA_RUNNER_LABELS %q lacks the job's label %q", labels.Value, l)
	}
	require.Equal(t, "false", j.Spec.Template.Annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"])
}

// lines returns the lines of s that contain every one of subs.
func lines(s string, subs ...string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1024*1024), 1024*1024)
	for sc.Scan() {
		l := sc.Text()
		ok := true
		for _, sub := range subs {
			if !strings.Contains(l, sub) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}
