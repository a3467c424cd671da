//go:build e2e

// The bed: one connection per test binary to the test bed's API server,
// Gitea and helm, the RunnerGroup CRD it shares with every test, and the
// contexts that bound a test and its cleanup.

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// HostLabel is the default runner label of every scaler the tests run:
// the bed has no Docker, so Gitea's runner must run jobs on the host (a
// docker:// label makes it require a Docker daemon and exit). Groups' own
// labels without a scheme are host labels too.
const HostLabel = "bed-host:host"

var CRDGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Testbed is the test bed: clients, Gitea, helm and the files the agent writes.
type Testbed struct {
	Root       string // repository root
	Dir        string // TESTBED_DIR
	Kubeconfig string
	Kube       kubernetes.Interface
	Dyn        dynamic.Interface
	mapper     *restmapper.DeferredDiscoveryRESTMapper
	Gitea      *GiteaAPI
	HelmBin    string
	HelmEnv    []string

	// WarnKube is a client whose responses' warnings land in warnings.
	WarnKube kubernetes.Interface
	Warnings *WarningLog
}

var (
	bedOnce sync.Once
	theBed  *Testbed
	bedErr  error
)

// Bed connects to the test bed once per test binary and makes sure the
// RunnerGroup CRD is installed. A bed that is down fails the test: these
// tests exist to run, and skipping would hide it.
func Bed(t *testing.T) *Testbed {
	t.Helper()
	bedOnce.Do(func() { theBed, bedErr = connectBed() })
	if bedErr != nil {
		t.Fatalf("test bed: %v", Redact(bedErr.Error()))
	}
	return theBed
}

func connectBed() (*Testbed, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := bedDir()
	if err != nil {
		return nil, err
	}
	b := &Testbed{Root: root, Dir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig")}
	HoldDir = filepath.Join(dir, "hold")
	if _, err := os.Stat(b.Kubeconfig); err != nil {
		return nil, fmt.Errorf("no kubeconfig at %s (%v): run `scripts/testbed up` first, or set TESTBED_DIR", b.Kubeconfig, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", b.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 30 * time.Second
	cfg.QPS, cfg.Burst = 50, 100
	if b.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if b.Dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	b.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(b.Kube.Discovery()))
	b.Warnings = &WarningLog{}
	wcfg := rest.CopyConfig(cfg)
	wcfg.WarningHandler = b.Warnings
	if b.WarnKube, err = kubernetes.NewForConfig(wcfg); err != nil {
		return nil, err
	}
	env, err := ReadEnvFile(filepath.Join(dir, "gitea.env"))
	if err != nil {
		return nil, err
	}
	if env["GITEA_URL"] == "" || env["GITEA_ADMIN_TOKEN"] == "" {
		return nil, fmt.Errorf("%s lacks GITEA_URL or GITEA_ADMIN_TOKEN", filepath.Join(dir, "gitea.env"))
	}
	b.Gitea = newGiteaAPI(env["GITEA_URL"], env["GITEA_ADMIN_TOKEN"])
	GiteaURL = env["GITEA_URL"]
	if err := b.findHelm(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := b.EnsureCRD(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// bedDir is TESTBED_DIR, or the repository's .testbed as scripts/testbed
// makes it.
func bedDir() (string, error) {
	if dir := os.Getenv("TESTBED_DIR"); dir != "" {
		return dir, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ".testbed"), nil
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

func ReadEnvFile(path string) (map[string]string, error) {
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
func (b *Testbed) findHelm() error {
	script := filepath.Join(b.Root, "scripts", "install-helm.sh")
	cmd := exec.Command("bash", "-c", `set -e; eval "$("$1" --print-env)"; command -v helm; env | grep '^HELM_' || true`, "bash", script)
	cmd.Dir = b.Root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%s --print-env: %v: %s", script, err, Tail(stderr.String(), 20))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) == 0 || !filepath.IsAbs(lines[0]) {
		return fmt.Errorf("%s --print-env gave no helm on PATH: %q", script, out)
	}
	b.HelmBin = lines[0]
	b.HelmEnv = append(os.Environ(), "KUBECONFIG="+b.Kubeconfig)
	b.HelmEnv = append(b.HelmEnv, lines[1:]...)
	return nil
}

// EnsureCRD server-side applies crds/ and waits until the CRD is Established.
// The CRD is cluster-wide and shared with the other e2e tests (and anyone
// else on the bed), so every release here installs with crds.install=false
// and the CRD is never deleted: deleting it would delete every RunnerGroup.
func (b *Testbed) EnsureCRD(ctx context.Context) error {
	raw, err := os.ReadFile(filepath.Join(b.Root, "crds", "gitea.bpg.pw_runnergroups.yaml"))
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{}
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096).Decode(&obj.Object); err != nil {
		return fmt.Errorf("decode CRD: %w", err)
	}
	if _, err := b.Dyn.Resource(CRDGVR).Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
		return fmt.Errorf("apply CRD: %w", err)
	}
	for {
		got, err := b.Dyn.Resource(CRDGVR).Get(ctx, obj.GetName(), metav1.GetOptions{})
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

// WarningLog collects the warnings the API server sends back to
// bed.warnKube (Pod Security Admission warns about workload templates it
// would refuse as pods).
type WarningLog struct {
	mu    sync.Mutex
	texts []string
}

func (w *WarningLog) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.texts = append(w.texts, text)
}

// Matching returns the warnings seen so far that contain sub.
func (w *WarningLog) Matching(sub string) []string {
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

// Keep says whether E2E_KEEP asks to leave what a test made in place.
func Keep() bool { return os.Getenv("E2E_KEEP") != "" }

// TestContext bounds a whole test.
func TestContext(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// CleanupContext is for t.Cleanup work, which must run even when the test's
// own context has expired.
func CleanupContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), time.Minute)
}
