//go:build e2e

// The chart under the shipped restricted-pods policy and Pod Security
// Admission "restricted", on the test bed's real kube-apiserver:
//
//   - the default listener (CronJob and Deployment mode) is admitted by
//     `helm install`, and its pods are admitted and run;
//   - a listenerTemplate that breaks a rule makes `helm install` itself fail
//     with the policy's message naming the rule and the container;
//   - runner Jobs run in an unlabelled namespace, as policies/README.md says
//     they must, and the very same Job shape is refused in a restricted one.
//
// Every helper here starts with "pol" so that it cannot clash with the other
// e2e files of this package. Namespaces are e2e-pol-<unique>, releases
// pol-<unique>. The restricted-pods policy and its binding are applied and
// left in place (never deleted: see the param-watch bug that
// policies/README.md describes; restricted-pods has no params, but the rule
// for the bed is the same). Run with:
//
//	scripts/testbed up
//	go test -count=1 -tags e2e -run 'TestPolicyChart' -v ./internal/e2e/
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	// polFieldManager owns what these tests apply.
	polFieldManager = "gitea-runner-operator-e2e-policy-chart"
	// polRestrictedLabel opts a namespace into the restricted-pods policy.
	polRestrictedLabel = "policies.gitea.bpg.pw/restricted"
	// polPSALabel turns on Pod Security Admission enforcement.
	polPSALabel = "pod-security.kubernetes.io/enforce"
	// polPolicy is the shipped policy (and binding) these tests run under.
	polPolicy = "restricted-pods"
	// polChart is the chart's name, and so the suffix of its object names.
	polChart = "gitea-runner-operator"
	// polScalerImage ends in gitea-runner-scaler, which the bed's agent
	// plays with the locally built scaler binary.
	polScalerImage = "registry.e2e.invalid/gitea-runner-operator/gitea-runner-scaler"
	// polGroupLabel is the label of runner Jobs that names their group.
	polGroupLabel = "gitea.bpg.pw/runnergroup-name"
	// polGiteaJobLabel is the label of runner Jobs that names the Gitea job.
	polGiteaJobLabel = "gitea.bpg.pw/gitea-job-id"

	// polPoll is how often a wait looks again.
	polPoll = time.Second
	// polStepWait bounds every single wait.
	polStepWait = 2 * time.Minute
)

var (
	polCRDGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	polVAPGVR = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}
	polRGGVR  = schema.GroupVersionResource{Group: "gitea.bpg.pw", Version: "v1alpha1", Resource: "runnergroups"}
)

// polSuffix makes this run's names unique: Gitea keeps organisations across
// runs, and namespaces of an earlier run may still be terminating.
var polSuffix = func() string {
	var b [2]byte
	_, _ = rand.Read(b[:])
	return strconv.FormatInt(time.Now().Unix()%(36*36*36*36*36), 36) + hex.EncodeToString(b[:1])
}()

// polName is "<prefix>-<run suffix>[-part...]".
func polName(prefix string, parts ...string) string {
	return strings.Join(append([]string{prefix, polSuffix}, parts...), "-")
}

// ---------------------------------------------------------------- the bed

// polEnv is the test bed as these tests use it.
type polEnv struct {
	root, dir string
	kube      kubernetes.Interface
	dyn       dynamic.Interface
	// warnKube is a client whose responses' warnings land in warnings.
	warnKube kubernetes.Interface
	warnings *polWarnings
	helmBin  string
	helmEnv  []string
	gitea    *polGitea
}

var (
	polOnce   sync.Once
	polShared *polEnv
	polErr    error
)

// polSetup connects to the bed named by TESTBED_DIR (default <repo>/.testbed)
// once per test binary, makes sure the RunnerGroup CRD exists and applies the
// restricted-pods policy. A bed that is down fails the test: skipping would
// hide it.
func polSetup(t *testing.T) *polEnv {
	t.Helper()
	polOnce.Do(func() {
		polShared, polErr = polConnect()
		if polErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), polStepWait)
		defer cancel()
		if polErr = polShared.polEnsureCRD(ctx); polErr != nil {
			return
		}
		polErr = polShared.polApplyPolicy(ctx)
	})
	if polErr != nil {
		t.Fatalf("test bed: %v", polRedact(polErr.Error()))
	}
	return polShared
}

func polConnect() (*polEnv, error) {
	root, err := polRepoRoot()
	if err != nil {
		return nil, err
	}
	dir := os.Getenv("TESTBED_DIR")
	if dir == "" {
		dir = filepath.Join(root, ".testbed")
	}
	e := &polEnv{root: root, dir: dir, warnings: &polWarnings{}}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if _, err := os.Stat(kubeconfig); err != nil {
		return nil, fmt.Errorf("no kubeconfig at %s (%v): run `scripts/testbed up` first, or set TESTBED_DIR", kubeconfig, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 30 * time.Second
	cfg.QPS, cfg.Burst = 50, 100
	if e.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if e.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	wcfg := rest.CopyConfig(cfg)
	wcfg.WarningHandler = e.warnings
	if e.warnKube, err = kubernetes.NewForConfig(wcfg); err != nil {
		return nil, err
	}
	env, err := polReadEnvFile(filepath.Join(dir, "gitea.env"))
	if err != nil {
		return nil, err
	}
	if env["GITEA_URL"] == "" || env["GITEA_ADMIN_TOKEN"] == "" {
		return nil, fmt.Errorf("%s lacks GITEA_URL or GITEA_ADMIN_TOKEN", filepath.Join(dir, "gitea.env"))
	}
	polSecrets.polAdd(env["GITEA_ADMIN_TOKEN"])
	e.gitea = &polGitea{url: strings.TrimRight(env["GITEA_URL"], "/"), token: env["GITEA_ADMIN_TOKEN"], hc: &http.Client{Timeout: 30 * time.Second}}
	if e.helmBin, e.helmEnv, err = polFindHelm(root); err != nil {
		return nil, err
	}
	e.helmEnv = append(e.helmEnv, "KUBECONFIG="+kubeconfig)
	return e, nil
}

func polRepoRoot() (string, error) {
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

func polReadEnvFile(path string) (map[string]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w (is the test bed up?)", path, err)
	}
	out := map[string]string{}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			out[k] = v
		}
	}
	return out, nil
}

// polFindHelm asks scripts/install-helm.sh (building helm first if need be)
// where helm is and which HELM_* folders it uses, instead of hard-coding a
// version. The script is found under either of its names.
func polFindHelm(root string) (string, []string, error) {
	var script string
	for _, name := range []string{"install-helm.sh", "install-helm"} {
		if p := filepath.Join(root, "scripts", name); polIsFile(p) {
			script = p
			break
		}
	}
	if script == "" {
		return "", nil, fmt.Errorf("no scripts/install-helm.sh under %s", root)
	}
	cmd := exec.Command("bash", "-c", `set -e; eval "$("$1" --print-env)"; command -v helm; env | grep '^HELM_' || true`, "bash", script)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", nil, fmt.Errorf("%s --print-env: %v: %s", script, err, polTail(stderr.String(), 20))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) == 0 || !filepath.IsAbs(lines[0]) {
		return "", nil, fmt.Errorf("%s --print-env put no helm on PATH: %q", script, out)
	}
	return lines[0], append(os.Environ(), lines[1:]...), nil
}

func polIsFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// polReadObjects reads every object of a (multi-document) YAML file.
func polReadObjects(path string) ([]*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var out []*unstructured.Unstructured
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		js, err := utilyaml.ToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("decoding %s: %w", path, err)
		}
		if s := strings.TrimSpace(string(js)); s == "" || s == "null" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", path, err)
		}
		out = append(out, obj)
	}
}

// polEnsureCRD applies crds/ only when the CRD is missing (it is shared:
// another engineer's newer copy must not be overwritten mid-run), then waits
// until it is Established. It is never deleted: that would delete every
// RunnerGroup on the bed.
func (e *polEnv) polEnsureCRD(ctx context.Context) error {
	objs, err := polReadObjects(filepath.Join(e.root, "crds", "gitea.bpg.pw_runnergroups.yaml"))
	if err != nil {
		return err
	}
	if len(objs) != 1 {
		return fmt.Errorf("crds/gitea.bpg.pw_runnergroups.yaml holds %d objects, want 1", len(objs))
	}
	crd := objs[0]
	res := e.dyn.Resource(polCRDGVR)
	if _, err := res.Get(ctx, crd.GetName(), metav1.GetOptions{}); apierrors.IsNotFound(err) {
		if _, err := res.Apply(ctx, crd.GetName(), crd, metav1.ApplyOptions{FieldManager: polFieldManager, Force: true}); err != nil {
			return fmt.Errorf("apply CRD: %w", err)
		}
	} else if err != nil {
		return err
	}
	var last string
	for {
		got, err := res.Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conds {
				if m, _ := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
					return nil
				}
			}
			last = fmt.Sprint(conds)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not Established (%s): %w", crd.GetName(), last, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// polApplyPolicy server-side applies policies/restricted-pods.yaml as
// shipped (the same as `kubectl apply -f`, idempotent) and waits until the
// API server has type-checked the policy without warnings. It never deletes
// the policy or its binding.
func (e *polEnv) polApplyPolicy(ctx context.Context) error {
	objs, err := polReadObjects(filepath.Join(e.root, "policies", "restricted-pods.yaml"))
	if err != nil {
		return err
	}
	kinds := map[string]bool{}
	for _, obj := range objs {
		gvr := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1"}
		switch obj.GetKind() {
		case "ValidatingAdmissionPolicy":
			gvr.Resource = "validatingadmissionpolicies"
		case "ValidatingAdmissionPolicyBinding":
			gvr.Resource = "validatingadmissionpolicybindings"
		default:
			return fmt.Errorf("unexpected %s in restricted-pods.yaml", obj.GetKind())
		}
		if obj.GetName() != polPolicy {
			return fmt.Errorf("%s is named %q, want %q", obj.GetKind(), obj.GetName(), polPolicy)
		}
		kinds[obj.GetKind()] = true
		if _, err := e.dyn.Resource(gvr).Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: polFieldManager, Force: true}); err != nil {
			return fmt.Errorf("apply %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	if len(kinds) != 2 {
		return fmt.Errorf("restricted-pods.yaml holds %v, want a policy and a binding", kinds)
	}
	var last string
	for {
		got, err := e.dyn.Resource(polVAPGVR).Get(ctx, polPolicy, metav1.GetOptions{})
		if err == nil {
			observed, _, _ := unstructured.NestedInt64(got.Object, "status", "observedGeneration")
			if observed == got.GetGeneration() {
				warnings, _, _ := unstructured.NestedSlice(got.Object, "status", "typeChecking", "expressionWarnings")
				if len(warnings) > 0 {
					return fmt.Errorf("policy %s: type-checking warnings %v", polPolicy, warnings)
				}
				return nil
			}
			last = fmt.Sprintf("observedGeneration %d, generation %d", observed, got.GetGeneration())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("policy %s not type-checked (%s): %w", polPolicy, last, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// ---------------------------------------------------------------- waiting

// polWait polls cond every polPoll for at most polStepWait. cond returns
// whether it is done, what it saw (for the failure message) and an error
// only for a broken invariant, which fails at once. Failures carry the dump.
func polWait(ctx context.Context, t *testing.T, what string, dump func() string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	deadline := time.Now().Add(polStepWait)
	last := ""
	for {
		done, state, err := cond(ctx)
		if state != "" {
			last = state
		}
		if err != nil {
			t.Fatalf("%s: %v\nlast state: %s\n%s", what, polRedact(err.Error()), polRedact(last), polDumpOf(dump))
		}
		if done {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s: not within %s\nlast state: %s\n%s", what, polStepWait, polRedact(last), polDumpOf(dump))
		}
		select {
		case <-ctx.Done():
		case <-time.After(polPoll):
		}
	}
}

func polDumpOf(dump func() string) string {
	if dump == nil {
		return ""
	}
	return polRedact(dump())
}

// polContext bounds a whole test.
func polContext(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// polCleanupContext is for t.Cleanup work, which must run even after the
// test's own context expired.
func polCleanupContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), time.Minute)
}

// ---------------------------------------------------------------- secrets

// polSecretSet holds every token these tests see, so output can redact them.
type polSecretSet struct {
	mu     sync.Mutex
	values []string
}

var polSecrets = &polSecretSet{}

func (s *polSecretSet) polAdd(v string) {
	if len(v) < 6 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.values, v) {
		s.values = append(s.values, v)
	}
}

func polRedact(s string) string {
	polSecrets.mu.Lock()
	defer polSecrets.mu.Unlock()
	for _, v := range polSecrets.values {
		s = strings.ReplaceAll(s, v, "<redacted>")
	}
	return s
}

func polTail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ---------------------------------------------------------------- warnings

// polWarnings collects the warnings the API server sends back (Pod Security
// Admission warns about workload templates it would refuse as pods).
type polWarnings struct {
	mu    sync.Mutex
	texts []string
}

func (w *polWarnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.texts = append(w.texts, text)
}

// polMatching returns the warnings seen so far that contain sub.
func (w *polWarnings) polMatching(sub string) []string {
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

// ---------------------------------------------------------------- Kubernetes

// polNamespace creates the namespace e2e-pol-<run>-<part>, restricted or not,
// and deletes it when the test ends. A restricted namespace carries both the
// policy's label and PSA's enforce=restricted, as policies/README.md asks;
// the function then waits until the policy refuses a probe there, so that no
// later admission can be a policy that has not caught up yet. The default
// ServiceAccount is created at once because pods need it.
func (e *polEnv) polNamespace(ctx context.Context, t *testing.T, part string, restricted bool) string {
	t.Helper()
	labels := map[string]string{"gitea.bpg.pw/e2e": "true"}
	if restricted {
		labels[polRestrictedLabel] = "true"
		labels[polPSALabel] = "restricted"
	}
	name := polName("e2e-pol", part)
	_, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := polCleanupContext()
		defer cancel()
		if err := e.kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", name, err)
		}
	})
	_, err = e.kube.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	if restricted {
		e.polWaitPolicyCovers(ctx, t, name)
	}
	return name
}

// polWaitPolicyCovers waits until restricted-pods refuses, in ns, a pod that
// passes PSA restricted but sets no resources and a writable root. PSA runs
// first and would hide the policy behind its own refusal, hence the shape.
func (e *polEnv) polWaitPolicyCovers(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pol-probe", Namespace: ns},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   polPtr(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:  "probe",
				Image: "registry.e2e.invalid/pol/probe:1",
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: polPtr(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	polWait(ctx, t, "restricted-pods refusing a probe pod in "+ns, nil, func(ctx context.Context) (bool, string, error) {
		_, err := e.kube.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return false, "the probe was admitted", nil
		}
		return strings.Contains(err.Error(), "restricted-pods/resources"), err.Error(), nil
	})
}

func polPtr[T any](v T) *T { return &v }

// polDump describes the namespaces for a failure message: pods, Jobs,
// warning events, and the tail of each container's log the bed's agent
// wrote.
func (e *polEnv) polDump(namespaces ...string) func() string {
	return func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		var sb strings.Builder
		for _, ns := range namespaces {
			fmt.Fprintf(&sb, "--- namespace %s\n", ns)
			if jobs, err := e.kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{}); err == nil {
				for _, j := range jobs.Items {
					fmt.Fprintf(&sb, "job %s: %s\n", j.Name, polJobState(&j))
				}
			}
			if pods, err := e.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
				for _, p := range pods.Items {
					fmt.Fprintf(&sb, "pod %s: %s on %q %s\n", p.Name, p.Status.Phase, p.Spec.NodeName, p.Status.Message)
					for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
						raw, _ := os.ReadFile(filepath.Join(e.dir, "logs", "pods", fmt.Sprintf("%s_%s_%s.log", ns, p.Name, c.Name)))
						if len(raw) > 0 {
							fmt.Fprintf(&sb, "  log %s:\n%s\n", c.Name, polTail(string(raw), 15))
						}
					}
				}
			}
			if evs, err := e.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
				for _, ev := range evs.Items {
					if ev.Type == corev1.EventTypeWarning {
						fmt.Fprintf(&sb, "event %s/%s %s: %s\n", ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason, ev.Message)
					}
				}
			}
		}
		return sb.String()
	}
}

func polJobState(j *batchv1.Job) string {
	var conds []string
	for _, c := range j.Status.Conditions {
		if c.Status == corev1.ConditionTrue {
			conds = append(conds, string(c.Type))
		}
	}
	return fmt.Sprintf("active=%d succeeded=%d failed=%d conditions=%v", j.Status.Active, j.Status.Succeeded, j.Status.Failed, conds)
}

func polJobCondition(j *batchv1.Job, typ batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// polJobPods lists the pods of a Job by the label the Job controller sets.
func (e *polEnv) polJobPods(ctx context.Context, ns, job string) ([]corev1.Pod, error) {
	list, err := e.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// polManualPass starts a scaler pass by hand, as the chart's NOTES.txt says
// (`kubectl create job --from=cronjob/<name> <job>`), with what that command
// sends: the CronJob's job template, its labels and annotations plus
// cronjob.kubernetes.io/instantiate=manual, owned by the CronJob. Done with
// client-go because kubectl is not among the tools the bed builds.
func (e *polEnv) polManualPass(ctx context.Context, t *testing.T, ns, cronJob, job string) *batchv1.Job {
	t.Helper()
	cj, err := e.kube.BatchV1().CronJobs(ns).Get(ctx, cronJob, metav1.GetOptions{})
	require.NoError(t, err)
	annotations := map[string]string{"cronjob.kubernetes.io/instantiate": "manual"}
	for k, v := range cj.Spec.JobTemplate.Annotations {
		annotations[k] = v
	}
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            job,
			Namespace:       ns,
			Labels:          cj.Spec.JobTemplate.Labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, batchv1.SchemeGroupVersion.WithKind("CronJob"))},
		},
		Spec: cj.Spec.JobTemplate.Spec,
	}
	got, err := e.kube.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{FieldManager: polFieldManager})
	require.NoError(t, err, "a manual pass is admitted in the restricted namespace")
	return got
}

// polWaitJobPod waits until the (only) pod of a Job reaches phase; a pod
// that fails, or a Job whose pods are refused, fails the test at once.
func (e *polEnv) polWaitJobPod(ctx context.Context, t *testing.T, ns, job string, phase corev1.PodPhase, dump func() string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	polWait(ctx, t, fmt.Sprintf("the pod of Job %s/%s %s", ns, job, phase), dump, func(ctx context.Context) (bool, string, error) {
		pods, err := e.polJobPods(ctx, ns, job)
		if err != nil {
			return false, err.Error(), nil
		}
		if len(pods) == 0 {
			// A refused pod leaves the Job podless, with a FailedCreate event.
			evs, err := e.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + job})
			if err == nil {
				for _, ev := range evs.Items {
					if ev.Reason == "FailedCreate" {
						return false, "", fmt.Errorf("the Job's pod was refused: %s", ev.Message)
					}
				}
			}
			return false, "no pod yet", nil
		}
		if len(pods) > 1 {
			return false, "", fmt.Errorf("%d pods, want 1 (a retried pass?)", len(pods))
		}
		pod = pods[0]
		if pod.Status.Phase == corev1.PodFailed && phase != corev1.PodFailed {
			return false, "", fmt.Errorf("pod %s failed: %s", pod.Name, pod.Status.Message)
		}
		return pod.Status.Phase == phase, fmt.Sprintf("pod %s %s", pod.Name, pod.Status.Phase), nil
	})
	return pod
}

// ---------------------------------------------------------------- helm

// polHelm runs helm with the bed's kubeconfig and helm's own folders.
func (e *polEnv) polHelm(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, e.helmBin, args...)
	cmd.Env = e.helmEnv
	cmd.Dir = e.root
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// polBaseValues is all the bed needs on top of the chart's defaults: the
// scaler image the agent plays, the shared CRD left alone, and the runner
// namespaces to serve (which keeps the RBAC namespaced too).
func polBaseValues(watch ...string) map[string]any {
	return map[string]any{
		"image":           map[string]any{"repository": polScalerImage},
		"crds":            map[string]any{"install": false},
		"watchNamespaces": watch,
	}
}

// polValuesFile writes values to a file of the test.
func polValuesFile(t *testing.T, values map[string]any) string {
	t.Helper()
	raw, err := yaml.Marshal(values)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(file, raw, 0o600))
	return file
}

// polHelmInstall runs `helm install <release> charts/gitea-runner-operator`
// into ns with the values files, in order, and returns helm's output and
// error. The release is uninstalled when the test ends, also after a failed
// install, which leaves the objects created before the refusal.
func (e *polEnv) polHelmInstall(ctx context.Context, t *testing.T, ns, release string, valueFiles ...string) (string, error) {
	t.Helper()
	args := []string{"install", release, filepath.Join(e.root, "charts", polChart), "--namespace", ns}
	for _, f := range valueFiles {
		args = append(args, "--values", f)
	}
	t.Cleanup(func() {
		ctx, cancel := polCleanupContext()
		defer cancel()
		if out, err := e.polHelm(ctx, "uninstall", release, "--namespace", ns); err != nil && !strings.Contains(out, "not found") {
			t.Errorf("helm uninstall %s -n %s: %v\n%s", release, ns, err, polRedact(out))
		}
	})
	ictx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	out, err := e.polHelm(ictx, args...)
	return polRedact(out), err
}

// polRefusal splits a restricted-pods refusal into its rules: rule name
// ("restricted-pods/resources") to its whole text. The policy joins the
// rules with "; " after "denied request: ".
func polRefusal(msg string) map[string]string {
	out := map[string]string{}
	_, rest, ok := strings.Cut(msg, "ValidatingAdmissionPolicy '"+polPolicy+"'")
	if !ok {
		return out
	}
	_, rest, ok = strings.Cut(rest, "denied request: ")
	if !ok {
		return out
	}
	rest, _, _ = strings.Cut(rest, "\n")
	for part := range strings.SplitSeq(rest, "; ") {
		part = strings.TrimSpace(part)
		if rule, _, ok := strings.Cut(part, ": "); ok && strings.HasPrefix(rule, polPolicy+"/") {
			out[rule] = part
		}
	}
	return out
}

func polKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ---------------------------------------------------------------- Gitea

// polGitea is a small REST client for the bed's Gitea, with the admin token.
type polGitea struct {
	url, token string
	hc         *http.Client
}

func (g *polGitea) polCall(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, g.url+"/api/v1"+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "token "+g.token)
	resp, err := g.hc.Do(req)
	if err != nil {
		return fmt.Errorf("gitea %s %s: %s", method, path, polRedact(err.Error()))
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("gitea %s %s: %s: %s", method, path, resp.Status, polRedact(polTail(string(raw), 5)))
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("gitea %s %s: decode: %v", method, path, err)
		}
	}
	return nil
}

// polGiteaJob is a job as Gitea's Actions API reports it.
type polGiteaJob struct {
	ID         int64    `json:"id"`
	Name       string   `json:"name"`
	Labels     []string `json:"labels"`
	Status     string   `json:"status"`
	Conclusion string   `json:"conclusion"`
	RunnerName string   `json:"runner_name"`
}

func (j polGiteaJob) polState() string {
	if j.Status == "completed" {
		return "completed/" + j.Conclusion
	}
	return j.Status
}

func (g *polGitea) polRepoJobs(ctx context.Context, owner, repo string) ([]polGiteaJob, error) {
	var out struct {
		Jobs []polGiteaJob `json:"jobs"`
	}
	err := g.polCall(ctx, http.MethodGet, "/repos/"+url.PathEscape(owner)+"/"+url.PathEscape(repo)+"/actions/jobs?limit=50", nil, &out)
	return out.Jobs, err
}

// polOrgScope makes the Gitea side of an org RunnerGroup: the organisation,
// a repository with a main branch, and the org's runner registration token.
// Repository and organisation are deleted when the test ends.
func (e *polEnv) polOrgScope(ctx context.Context, t *testing.T, org, repo string) (regToken string) {
	t.Helper()
	g := e.gitea
	require.NoError(t, g.polCall(ctx, http.MethodPost, "/orgs", map[string]any{"username": org, "visibility": "public"}, nil))
	t.Cleanup(func() {
		ctx, cancel := polCleanupContext()
		defer cancel()
		if err := g.polCall(ctx, http.MethodDelete, "/orgs/"+url.PathEscape(org), nil, nil); err != nil {
			t.Logf("deleting Gitea org %s: %v", org, err)
		}
	})
	require.NoError(t, g.polCall(ctx, http.MethodPost, "/orgs/"+url.PathEscape(org)+"/repos",
		map[string]any{"name": repo, "auto_init": true, "default_branch": "main"}, nil))
	t.Cleanup(func() { // runs before the org's cleanup: an org with repositories cannot go
		ctx, cancel := polCleanupContext()
		defer cancel()
		if err := g.polCall(ctx, http.MethodDelete, "/repos/"+url.PathEscape(org)+"/"+url.PathEscape(repo), nil, nil); err != nil {
			t.Logf("deleting Gitea repository %s/%s: %v", org, repo, err)
		}
	})
	var tok struct {
		Token string `json:"token"`
	}
	require.NoError(t, g.polCall(ctx, http.MethodPost, "/orgs/"+url.PathEscape(org)+"/actions/runners/registration-token", nil, &tok))
	require.NotEmpty(t, tok.Token, "registration token of org %s", org)
	polSecrets.polAdd(tok.Token)
	return tok.Token
}

// polPushWorkflow commits a one-job workflow that runs on label; the push
// triggers it.
func (e *polEnv) polPushWorkflow(ctx context.Context, t *testing.T, owner, repo, job, label string) {
	t.Helper()
	wf := fmt.Sprintf("name: pol\non: [push]\njobs:\n  %s:\n    runs-on: [%s]\n    steps:\n      - run: echo %s\n", job, label, job)
	require.NoError(t, e.gitea.polCall(ctx, http.MethodPost,
		"/repos/"+url.PathEscape(owner)+"/"+url.PathEscape(repo)+"/contents/.gitea/workflows/pol.yaml", map[string]any{
			"content": base64.StdEncoding.EncodeToString([]byte(wf)),
			"message": "e2e: a workflow for the policy-chart test",
			"branch":  "main",
		}, nil))
}

// ---------------------------------------------------------------- tests

// polRules are restricted-pods' rules, as the refusal names them.
var polRules = []string{"resources", "runAsNonRoot", "allowPrivilegeEscalation", "readOnlyRootFilesystem", "capabilities", "seccompProfile"}

// TestPolicyChartCronJobListener installs the chart with its default
// listener (mode cronjob) into a namespace under restricted-pods and PSA
// restricted, runs a manual pass there, lets that listener serve a real
// Gitea job of a RunnerGroup in an unlabelled runner namespace, and then
// shows that the same runner Job is refused in the restricted namespace:
// why policies/README.md says runner namespaces must stay unlabelled.
func TestPolicyChartCronJobListener(t *testing.T) {
	t.Parallel()
	e := polSetup(t)
	ctx := polContext(t, 5*time.Minute)

	sys := e.polNamespace(ctx, t, "cron", true)
	runners := e.polNamespace(ctx, t, "cron-runners", false)
	dump := e.polDump(sys, runners)

	// The Gitea scope and the RunnerGroup. The runner label is unique to the
	// run, so that no other test's runner can take this job.
	org, repo, wfJob, label := polName("pol"), "app", "build", polName("pol", "label")
	regToken := e.polOrgScope(ctx, t, org, repo)
	_, err := e.kube.CoreV1().Secrets(runners).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "pol-tokens"},
		StringData: map[string]string{"registration": regToken, "api": e.gitea.token},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	const group = "pol-runners"
	rg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gitea.bpg.pw/v1alpha1",
		"kind":       "RunnerGroup",
		"metadata":   map[string]any{"name": group, "namespace": runners},
		"spec": map[string]any{
			"scope":             "org",
			"org":               org,
			"gitea":             map[string]any{"url": e.gitea.url},
			"labels":            []any{label},
			"maxActiveRunners":  int64(2),
			"registrationToken": map[string]any{"secretRef": map[string]any{"name": "pol-tokens", "key": "registration"}},
			"authToken":         map[string]any{"secretRef": map[string]any{"name": "pol-tokens", "key": "api"}},
		},
	}}
	_, err = e.dyn.Resource(polRGGVR).Namespace(runners).Create(ctx, rg, metav1.CreateOptions{FieldManager: polFieldManager})
	require.NoError(t, err)

	// The default listener, admitted as a CronJob.
	release := polName("pol", "cron")
	workload := release + "-" + polChart
	out, err := e.polHelmInstall(ctx, t, sys, release, polValuesFile(t, polBaseValues(runners)))
	require.NoError(t, err, "helm install with the default listener must be admitted:\n%s", out)
	assert.NotContains(t, out, "PodSecurity", "PSA warns about nothing in the default listener's pod template")
	cj, err := e.kube.BatchV1().CronJobs(sys).Get(ctx, workload, metav1.GetOptions{})
	require.NoError(t, err, "the CronJob exists")
	require.NotEmpty(t, cj.Spec.JobTemplate.Spec.Template.Spec.Containers)
	assert.Equal(t, "listener", cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Name)

	// A job for the listener to serve, queued before the manual pass.
	e.polPushWorkflow(ctx, t, org, repo, wfJob, label)
	var gjob polGiteaJob
	polWait(ctx, t, "the Gitea job "+wfJob+" queued", dump, func(ctx context.Context) (bool, string, error) {
		jobs, err := e.gitea.polRepoJobs(ctx, org, repo)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, j := range jobs {
			if j.Name == wfJob {
				gjob = j
				// A scheduled tick may have served it already: fine too.
				return j.Status != "waiting", j.polState(), nil
			}
		}
		return false, fmt.Sprintf("%d jobs, none named %s", len(jobs), wfJob), nil
	})
	require.Contains(t, gjob.Labels, label)

	// A manual pass, admitted, runs to Succeeded (exit 0: the group served).
	manual := polName("pol", "cron", "manual")
	e.polManualPass(ctx, t, sys, workload, manual)
	pass := e.polWaitJobPod(ctx, t, sys, manual, corev1.PodSucceeded, dump)
	t.Logf("manual pass %s: pod %s Succeeded", manual, pass.Name)

	// The runner Job in the unlabelled namespace: one for the Gitea job,
	// its privileged pod admitted, the Job Complete, the Gitea job a success.
	var runner batchv1.Job
	polWait(ctx, t, "the runner Job of Gitea job #"+strconv.FormatInt(gjob.ID, 10)+" Complete and the job a success", dump, func(ctx context.Context) (bool, string, error) {
		list, err := e.kube.BatchV1().Jobs(runners).List(ctx, metav1.ListOptions{
			LabelSelector: polGroupLabel + "=" + group + "," + polGiteaJobLabel + "=" + strconv.FormatInt(gjob.ID, 10),
		})
		if err != nil {
			return false, err.Error(), nil
		}
		if len(list.Items) > 1 {
			return false, "", fmt.Errorf("%d runner Jobs for one Gitea job", len(list.Items))
		}
		if len(list.Items) == 0 {
			return false, "no runner Job yet", nil
		}
		runner = list.Items[0]
		if polJobCondition(&runner, batchv1.JobFailed) {
			return false, "", fmt.Errorf("runner Job %s failed: %s", runner.Name, polJobState(&runner))
		}
		jobs, err := e.gitea.polRepoJobs(ctx, org, repo)
		if err != nil {
			return false, err.Error(), nil
		}
		state := ""
		for _, j := range jobs {
			if j.ID == gjob.ID {
				gjob = j
				state = j.polState()
			}
		}
		if gjob.Status == "completed" && gjob.Conclusion != "success" {
			return false, "", fmt.Errorf("Gitea job #%d ended %s", gjob.ID, state)
		}
		seen := fmt.Sprintf("runner Job %s %s; Gitea job #%d %s on runner %q", runner.Name, polJobState(&runner), gjob.ID, state, gjob.RunnerName)
		return polJobCondition(&runner, batchv1.JobComplete) && state == "completed/success", seen, nil
	})
	assert.Equal(t, runner.Name, gjob.RunnerName, "the runner Job's runner took the Gitea job")
	rpod := runner.Spec.Template.Spec
	require.Len(t, rpod.Containers, 1)
	sc := rpod.Containers[0].SecurityContext
	require.True(t, sc != nil && sc.Privileged != nil && *sc.Privileged, "the runner container is privileged (dind)")
	pods, err := e.polJobPods(ctx, runners, runner.Name)
	require.NoError(t, err)
	require.NotEmpty(t, pods, "the privileged runner pod was admitted")
	assert.Equal(t, corev1.PodSucceeded, pods[len(pods)-1].Status.Phase)

	// The same runner Job, and its pod, in the restricted namespace.
	t.Run("the runner Job is refused by restricted-pods in a restricted namespace", func(t *testing.T) {
		job := polRunnerJobCopy(&runner, sys)
		_, err := e.warnKube.BatchV1().Jobs(sys).Create(ctx, job, metav1.CreateOptions{FieldManager: polFieldManager})
		require.Error(t, err, "the runner Job must be refused where the namespace is restricted")
		assert.True(t, apierrors.IsForbidden(err), "refused by the policy: %v", err)
		assert.Contains(t, err.Error(), `jobs.batch "`+job.Name+`" is forbidden: ValidatingAdmissionPolicy '`+polPolicy+`' with binding '`+polPolicy+`' denied request`)
		rules := polRefusal(err.Error())
		for _, r := range polRules {
			seg, ok := rules[polPolicy+"/"+r]
			if assert.True(t, ok, "rule %s/%s in the refusal: %v", polPolicy, r, err) {
				assert.True(t, strings.HasSuffix(seg, "in: runner)"), "rule %s names the runner container: %s", r, seg)
			}
		}
		// PSA only warns about templates; what it says is why the pod
		// could never run here either.
		assert.NotEmpty(t, e.warnings.polMatching(`would violate PodSecurity "restricted:latest": privileged (container "runner"`),
			"PSA's warning about the privileged runner container")
	})
	t.Run("the runner pod is refused by PSA restricted", func(t *testing.T) {
		tmpl := polRunnerJobCopy(&runner, sys).Spec.Template
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: runner.Name + "-pod", Namespace: sys, Labels: tmpl.Labels, Annotations: tmpl.Annotations},
			Spec:       tmpl.Spec,
		}
		_, err := e.kube.CoreV1().Pods(sys).Create(ctx, pod, metav1.CreateOptions{FieldManager: polFieldManager})
		require.Error(t, err, "the runner pod must be refused where the namespace is restricted")
		assert.True(t, apierrors.IsForbidden(err), "refused by admission: %v", err)
		// Pod Security Admission runs before the policies and refuses first.
		assert.Contains(t, err.Error(), `violates PodSecurity "restricted:latest": privileged (container "runner" must not set securityContext.privileged=true)`)
	})
}

// polRunnerJobCopy is a runner Job as the scaler made it, ready to be
// created again in ns: without what the API server and the Job controller
// added (selector, controller-uid labels) or the owner in its namespace.
func polRunnerJobCopy(j *batchv1.Job, ns string) *batchv1.Job {
	spec := *j.Spec.DeepCopy()
	spec.Selector = nil
	spec.ManualSelector = nil
	for _, k := range []string{"controller-uid", batchv1.ControllerUidLabel, "job-name", batchv1.JobNameLabel} {
		delete(spec.Template.Labels, k)
	}
	labels := map[string]string{}
	for k, v := range j.Labels {
		labels[k] = v
	}
	for _, k := range []string{"controller-uid", batchv1.ControllerUidLabel, "job-name", batchv1.JobNameLabel} {
		delete(labels, k)
	}
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: j.Name, Namespace: ns, Labels: labels}, Spec: spec}
}

// TestPolicyChartDeploymentListener installs the chart in mode deployment
// into a namespace under restricted-pods and PSA restricted: the Deployment
// is admitted, and its pod is admitted, Running and passing.
func TestPolicyChartDeploymentListener(t *testing.T) {
	t.Parallel()
	e := polSetup(t)
	ctx := polContext(t, 3*time.Minute)

	sys := e.polNamespace(ctx, t, "deploy", true)
	runners := e.polNamespace(ctx, t, "deploy-runners", false)
	dump := e.polDump(sys)

	release := polName("pol", "deploy")
	workload := release + "-" + polChart
	values := polBaseValues(runners)
	values["mode"] = "deployment"
	out, err := e.polHelmInstall(ctx, t, sys, release, polValuesFile(t, values))
	require.NoError(t, err, "helm install in mode deployment must be admitted:\n%s", out)
	assert.NotContains(t, out, "PodSecurity", "PSA warns about nothing in the default listener's pod template")
	_, err = e.kube.AppsV1().Deployments(sys).Get(ctx, workload, metav1.GetOptions{})
	require.NoError(t, err, "the Deployment exists")

	var pod corev1.Pod
	polWait(ctx, t, "the Deployment's pod Running and available", dump, func(ctx context.Context) (bool, string, error) {
		evs, err := e.kube.CoreV1().Events(sys).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedCreate"})
		if err == nil && len(evs.Items) > 0 {
			return false, "", fmt.Errorf("a pod was refused: %s", evs.Items[0].Message)
		}
		pods, err := e.kube.CoreV1().Pods(sys).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
		if err != nil {
			return false, err.Error(), nil
		}
		d, err := e.kube.AppsV1().Deployments(sys).Get(ctx, workload, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		var phases []string
		running := 0
		for _, p := range pods.Items {
			phases = append(phases, p.Name+"="+string(p.Status.Phase))
			if p.Status.Phase == corev1.PodRunning {
				pod, running = p, running+1
			}
		}
		seen := fmt.Sprintf("pods %v, available replicas %d", phases, d.Status.AvailableReplicas)
		return running == 1 && d.Status.AvailableReplicas == 1, seen, nil
	})
	assert.Equal(t, "listener", pod.Spec.Containers[0].Name)
	// The pod is the scaler, looping: its first pass has finished (the bed's
	// agent writes each container's output under TESTBED_DIR/logs/pods).
	logFile := filepath.Join(e.dir, "logs", "pods", fmt.Sprintf("%s_%s_listener.log", sys, pod.Name))
	polWait(ctx, t, "a finished pass in the listener's log", dump, func(ctx context.Context) (bool, string, error) {
		raw, err := os.ReadFile(logFile)
		if err != nil {
			return false, err.Error(), nil
		}
		return strings.Contains(string(raw), "pass finished"), polTail(string(raw), 3), nil
	})
}

// TestPolicyChartRefusals installs the chart with values that break one rule
// each: `helm install` itself must fail, with the policy's message naming
// exactly that rule and the container, and the workload must not exist.
func TestPolicyChartRefusals(t *testing.T) {
	t.Parallel()
	e := polSetup(t)
	ctx := polContext(t, 3*time.Minute)
	ns := e.polNamespace(ctx, t, "refusals", true)
	base := polValuesFile(t, polBaseValues(ns))

	const cronJobs, deployments = "cronjobs.batch", "deployments.apps"
	tests := map[string]struct {
		file  string // under testdata/policy-chart
		kind  string // the resource the refusal names
		rules map[string][]string
	}{
		"no limits": {
			file: "no-limits.yaml", kind: cronJobs,
			rules: map[string][]string{"resources": {"resources.requests and resources.limits", "(missing in: listener)"}},
		},
		"run as root": {
			file: "run-as-root.yaml", kind: cronJobs,
			rules: map[string][]string{"runAsNonRoot": {"securityContext.runAsNonRoot: true", "(not set in: listener)"}},
		},
		"privilege escalation": {
			file: "privilege-escalation.yaml", kind: deployments,
			rules: map[string][]string{"allowPrivilegeEscalation": {"securityContext.allowPrivilegeEscalation: false", "(not set in: listener)"}},
		},
		"writable root filesystem": {
			file: "writable-root.yaml", kind: cronJobs,
			rules: map[string][]string{"readOnlyRootFilesystem": {"securityContext.readOnlyRootFilesystem: true", "(not set in: listener)"}},
		},
		"sidecar without resources": {
			file: "sidecar-without-resources.yaml", kind: deployments,
			rules: map[string][]string{"resources": {"resources.requests and resources.limits", "(missing in: sidecar)"}},
		},
		"initContainer keeping capabilities": {
			file: "init-keeps-capabilities.yaml", kind: cronJobs,
			rules: map[string][]string{"capabilities": {"drop: [ALL]", "(not dropped in: wait)"}},
		},
	}
	i := 0
	for name, tc := range tests {
		i++
		release := polName("pol", "bad"+strconv.Itoa(i))
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			workload := release + "-" + polChart
			out, err := e.polHelmInstall(ctx, t, ns, release, base, filepath.Join(e.root, "internal", "e2e", "testdata", "policy-chart", tc.file))
			require.Error(t, err, "helm install must fail:\n%s", out)
			require.Contains(t, out, fmt.Sprintf(`%s "%s" is forbidden: ValidatingAdmissionPolicy '%s' with binding '%s' denied request: `,
				tc.kind, workload, polPolicy, polPolicy), "refused by the policy at install time")
			got := polRefusal(out)
			want := make([]string, 0, len(tc.rules))
			for r := range tc.rules {
				want = append(want, polPolicy+"/"+r)
			}
			assert.ElementsMatch(t, want, polKeys(got), "exactly the broken rules:\n%s", out)
			for r, phrases := range tc.rules {
				for _, p := range phrases {
					assert.Contains(t, got[polPolicy+"/"+r], p)
				}
			}
			var gerr error
			if tc.kind == cronJobs {
				_, gerr = e.kube.BatchV1().CronJobs(ns).Get(ctx, workload, metav1.GetOptions{})
			} else {
				_, gerr = e.kube.AppsV1().Deployments(ns).Get(ctx, workload, metav1.GetOptions{})
			}
			assert.True(t, apierrors.IsNotFound(gerr), "the refused %s does not exist: %v", tc.kind, gerr)
		})
	}
}
