package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Config configures an Agent.
type Config struct {
	Client kubernetes.Interface
	// NodeSelector selects the fake nodes whose pods the agent plays.
	NodeSelector string
	// APIServer and CAFile go into the kubeconfig handed to pod processes; an empty
	// CAFile means insecure-skip-tls-verify.
	APIServer string
	CAFile    string
	// ScalerBin plays scaler images, SteeredRunnerBin steered-runner images.
	ScalerBin        string
	SteeredRunnerBin string
	// GiteaRunnerDir holds Gitea's runner as its images ship it: the gitea-runner
	// binary and the entrypoint script run.sh. It plays a runner image whose tag
	// names no release of GiteaRunnerReleaseDirs.
	GiteaRunnerDir string
	// GiteaRunnerReleaseDirs holds, by version ("3.1.0"), the same for each
	// runner release the bed builds: an image tagged with a release (3.1.0,
	// v3.1.0, 3.1.0-dind-rootless) is played by that release, as it would run
	// in a cluster.
	GiteaRunnerReleaseDirs map[string]string
	// GiteaRunnerConfig is the runner config file (CONFIG_FILE) for runner
	// containers whose env names none; empty for the runner's built-in defaults.
	GiteaRunnerConfig string
	// LogDir receives <namespace>_<pod>_<container>.log per container.
	LogDir string
	// WorkDir holds per-pod working directories, tokens and kubeconfigs.
	WorkDir string
	// RunnerEnv is set for steered-runner processes before the pod's own env (which wins).
	RunnerEnv []string
	// MaxPods bounds how many pods run at once; more wait in Pending.
	MaxPods int
	// Workers is how many pod events are handled at once.
	Workers int
	// BackoffBase and BackoffMax bound the restart back-off.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// TokenTTL is the lifetime of minted service-account tokens.
	TokenTTL time.Duration
	// Resync is how often every pod is looked at again without an event.
	Resync time.Duration
	Logger *slog.Logger
}

const nodeIndex = "spec.nodeName"

// Agent plays the kubelet of the fake nodes.
type Agent struct {
	cfg       Config
	log       *slog.Logger
	runnerEnv *Env
	// giteaRunners are the runner releases by version, "" the default one.
	giteaRunners map[string]giteaRunner

	podLister  corelisters.PodLister
	podIndex   cache.Indexer
	nodeLister corelisters.NodeLister
	queue      workqueue.TypedRateLimitingInterface[string]

	mu       sync.Mutex
	runners  map[types.UID]*podRunner
	finished map[types.UID]string // pods whose runner has ended, so a stale cache cannot start them again
	wg       sync.WaitGroup
}

// New checks the configuration and builds an agent.
func New(cfg Config) (*Agent, error) {
	if cfg.Client == nil || cfg.APIServer == "" || cfg.LogDir == "" || cfg.WorkDir == "" {
		return nil, errors.New("client, API server, log dir and work dir are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxPods <= 0 {
		cfg.MaxPods = 16
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = time.Second
	}
	if cfg.BackoffMax < cfg.BackoffBase {
		cfg.BackoffMax = 10 * cfg.BackoffBase
	}
	if cfg.TokenTTL < 10*time.Minute {
		// The API server refuses shorter bound tokens.
		cfg.TokenTTL = time.Hour
	}
	if cfg.Resync <= 0 {
		cfg.Resync = time.Minute
	}
	runnerEnv := &Env{}
	for _, kv := range cfg.RunnerEnv {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("runner env %q is not NAME=value", kv)
		}
		runnerEnv.Set(k, v)
	}
	giteaRunners := map[string]giteaRunner{}
	dirs := map[string]string{}
	for release, dir := range cfg.GiteaRunnerReleaseDirs {
		dirs[release] = dir
	}
	if cfg.GiteaRunnerDir != "" {
		dirs[""] = cfg.GiteaRunnerDir
	}
	for release, dir := range dirs {
		r, err := loadGiteaRunner(dir)
		if err != nil {
			return nil, fmt.Errorf("gitea runner %q: %w", release, err)
		}
		giteaRunners[release] = r
	}
	for _, d := range []string{cfg.LogDir, cfg.WorkDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	return &Agent{
		cfg:          cfg,
		log:          cfg.Logger,
		runnerEnv:    runnerEnv,
		runners:      map[types.UID]*podRunner{},
		finished:     map[types.UID]string{},
		giteaRunners: giteaRunners,
	}, nil
}

// Run plays pods until ctx ends, then stops every container it started.
func (a *Agent) Run(ctx context.Context) error {
	a.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "pods"})

	nodeFactory := informers.NewSharedInformerFactoryWithOptions(a.cfg.Client, a.cfg.Resync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = a.cfg.NodeSelector }))
	podFactory := informers.NewSharedInformerFactoryWithOptions(a.cfg.Client, a.cfg.Resync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermNotEqualSelector("spec.nodeName", "").String()
		}))
	podInformer := podFactory.Core().V1().Pods()
	nodeInformer := nodeFactory.Core().V1().Nodes()
	if err := podInformer.Informer().AddIndexers(cache.Indexers{nodeIndex: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}}); err != nil {
		return err
	}
	a.podLister = podInformer.Lister()
	a.podIndex = podInformer.Informer().GetIndexer()
	a.nodeLister = nodeInformer.Lister()

	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			a.queue.Add(key)
		}
	}
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		return err
	}
	// A pod bound before its node was known waits for the node's event.
	nodeChanged := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if n, ok := obj.(*corev1.Node); ok {
			pods, _ := a.podIndex.ByIndex(nodeIndex, n.Name)
			for _, p := range pods {
				enqueue(p)
			}
		}
	}
	if _, err := nodeInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    nodeChanged,
		UpdateFunc: func(_, obj any) { nodeChanged(obj) },
		DeleteFunc: nodeChanged,
	}); err != nil {
		return err
	}

	nodeFactory.Start(ctx.Done())
	podFactory.Start(ctx.Done())
	for _, synced := range []map[string]bool{
		typeNames(nodeFactory.WaitForCacheSync(ctx.Done())),
		typeNames(podFactory.WaitForCacheSync(ctx.Done())),
	} {
		for name, ok := range synced {
			if !ok {
				return fmt.Errorf("cache of %s did not sync", name)
			}
		}
	}
	nodes, _ := a.nodeLister.List(everything())
	a.log.Info("agent ready", "fake_nodes", len(nodes), "node_selector", a.cfg.NodeSelector, "max_pods", a.cfg.MaxPods)

	var workers sync.WaitGroup
	for range a.cfg.Workers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			wait.UntilWithContext(ctx, a.work, time.Second)
		}()
	}
	<-ctx.Done()
	a.queue.ShutDown()
	workers.Wait()
	a.shutdown()
	nodeFactory.Shutdown()
	podFactory.Shutdown()
	return nil
}

// shutdown stops every running pod's containers and waits for them, bounded.
func (a *Agent) shutdown() {
	a.mu.Lock()
	n := len(a.runners)
	for _, r := range a.runners {
		r.requestStop(stopShutdown, 5*time.Second)
	}
	a.mu.Unlock()
	a.log.Info("agent stopping", "running_pods", n)
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		a.log.Warn("some containers did not stop in time")
	}
}

func (a *Agent) work(ctx context.Context) {
	for {
		key, quit := a.queue.Get()
		if quit {
			return
		}
		err := a.sync(ctx, key)
		if err != nil && ctx.Err() == nil {
			a.log.Warn("sync failed, retrying", "pod", key, "err", err)
			a.queue.AddRateLimited(key)
		} else {
			a.queue.Forget(key)
		}
		a.queue.Done(key)
	}
}

func (a *Agent) isFakeNode(name string) bool {
	if name == "" {
		return false
	}
	_, err := a.nodeLister.Get(name)
	return err == nil
}

// sync brings one pod's local processes in line with the pod in the API.
func (a *Agent) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := a.podLister.Pods(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	// Runners of this name that are not this pod belong to a pod that is gone (a pod
	// of the same name may already have replaced it).
	for uid, r := range a.runners {
		if r.key == key && (pod == nil || uid != pod.UID) {
			r.requestStop(stopGone, 2*time.Second)
		}
	}
	for uid, k := range a.finished {
		if k == key && (pod == nil || uid != pod.UID) {
			delete(a.finished, uid)
		}
	}
	if pod == nil || !a.isFakeNode(pod.Spec.NodeName) {
		return nil
	}

	r := a.runners[pod.UID]
	if pod.DeletionTimestamp != nil {
		if r != nil {
			r.requestStop(stopDeleted, gracePeriod(pod))
			return nil
		}
		// Nothing runs for it (it finished, never started, or an earlier agent ran
		// it): only the kubelet's last step, removing the pod, is left.
		if err := a.forceDelete(ctx, pod); err != nil {
			return err
		}
		_ = os.RemoveAll(a.podDir(pod))
		return nil
	}
	if r != nil {
		return nil
	}
	if _, done := a.finished[pod.UID]; done || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil
	}
	if len(a.runners) >= a.cfg.MaxPods {
		a.queue.AddAfter(key, 2*time.Second)
		return nil
	}
	r = newPodRunner(a, pod.DeepCopy(), key)
	a.runners[pod.UID] = r
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		r.run(ctx)
		a.mu.Lock()
		delete(a.runners, pod.UID)
		a.finished[pod.UID] = key
		a.mu.Unlock()
		if ctx.Err() == nil {
			a.queue.Add(key)
		}
	}()
	return nil
}

func (a *Agent) podDir(pod *corev1.Pod) string {
	return filepath.Join(a.cfg.WorkDir, "pods", pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
}

// forceDelete removes a pod whose containers are gone, as the kubelet does once it
// has stopped them: a delete with grace period 0, for this pod's UID only.
func (a *Agent) forceDelete(ctx context.Context, pod *corev1.Pod) error {
	zero := int64(0)
	uid := pod.UID
	err := a.cfg.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err == nil {
		a.log.Info("removed deleted pod", "pod", pod.Namespace+"/"+pod.Name)
	}
	return err
}

// gracePeriod is the time a deleted pod's processes get between SIGTERM and SIGKILL.
func gracePeriod(pod *corev1.Pod) time.Duration {
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		return time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	default:
		return 30 * time.Second
	}
}

func typeNames(m map[reflect.Type]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for t, ok := range m {
		out[t.String()] = ok
	}
	return out
}

func everything() labels.Selector { return labels.Everything() }
