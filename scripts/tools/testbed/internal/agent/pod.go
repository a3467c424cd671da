package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// Annotations a test can put on a pod to end its stand-in main containers without
// deleting the pod.
const (
	// AnnotationExitAfter is a duration after which stand-in main containers exit.
	AnnotationExitAfter = "testbed.gitea.bpg.pw/exit-after"
	// AnnotationExitCode is the code they exit with then (default 0).
	AnnotationExitCode = "testbed.gitea.bpg.pw/exit-code"
)

// Exit codes the kubelet reports for containers that did not exit by themselves.
const (
	exitStartError = 128
	exitSIGTERM    = 128 + int32(syscall.SIGTERM)
)

type containerSpec struct {
	c       *corev1.Container
	kind    Kind
	init    bool
	sidecar bool // an init container with restartPolicy Always
}

// containerRun is the live state of one container of a played pod.
type containerRun struct {
	spec     containerSpec
	restarts int32
	state    corev1.ContainerState
	last     corev1.ContainerState
	// mounts maps the container's configMap, secret and emptyDir mount
	// paths to where mountVolumes wrote them.
	mounts map[string]string
}

func (c *containerRun) exitCode() int32 {
	if t := c.state.Terminated; t != nil {
		return t.ExitCode
	}
	return 0
}

// stopReason says why a pod's containers are being stopped.
type stopReason int

const (
	stopNone     stopReason = iota
	stopDeleted             // the pod is being deleted: finish the kubelet's part of it
	stopGone                // the pod is gone from the API: nothing left to report
	stopShutdown            // the agent is exiting: leave the pod as it is
)

// podRunner plays one pod from its first start to its deletion.
type podRunner struct {
	a   *Agent
	log *slog.Logger
	key string
	pod *corev1.Pod // as first seen; nothing read from it later can change
	dir string

	stopCtx context.Context
	cancel  context.CancelFunc

	mu          sync.Mutex
	reason      stopReason
	grace       time.Duration
	phase       corev1.PodPhase
	statusMsg   string
	statusWhy   string
	initialized bool
	startTime   metav1.Time
	runs        []*containerRun // init containers first, in spec order
	mainsDone   chan struct{}   // closed once every process-backed main container has ended

	dirty   chan struct{}
	writeMu sync.Mutex

	// net is the pod's own network namespace and loopback forward
	// (AnnotationForward); nil for a pod that shares the host's.
	net    *podNetwork
	netErr error
}

func newPodRunner(a *Agent, pod *corev1.Pod, key string) *podRunner {
	r := &podRunner{
		a:         a,
		log:       a.log.With("pod", key, "uid", string(pod.UID)),
		key:       key,
		pod:       pod,
		dir:       filepath.Join(a.cfg.WorkDir, "pods", pod.Namespace+"_"+pod.Name+"_"+string(pod.UID)),
		phase:     corev1.PodPending,
		startTime: metav1.Now().Rfc3339Copy(),
		dirty:     make(chan struct{}, 1),
	}
	r.stopCtx, r.cancel = context.WithCancel(context.Background())
	if v, ok := pod.Annotations[AnnotationForward]; ok {
		fwd, err := ParseForward(v)
		r.net, r.netErr = &podNetwork{fwd: fwd, log: r.log}, err
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		sidecar := c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		r.runs = append(r.runs, r.newRun(containerSpec{c: c, kind: ClassifyImage(c.Image), init: true, sidecar: sidecar}))
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		r.runs = append(r.runs, r.newRun(containerSpec{c: c, kind: ClassifyImage(c.Image)}))
	}
	return r
}

func (r *podRunner) newRun(spec containerSpec) *containerRun {
	reason := "PodInitializing"
	if spec.init {
		reason = "ContainerCreating"
	}
	return &containerRun{spec: spec, state: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
}

// requestStop stops the pod's containers. A later request may shorten the grace
// period (a second delete with a smaller grace does that for real pods too).
func (r *podRunner) requestStop(reason stopReason, grace time.Duration) {
	r.mu.Lock()
	if r.reason == stopNone || grace < r.grace {
		r.grace = grace
	}
	// Deletion outranks a plain stop: the pod must still be removed.
	if r.reason == stopNone || reason == stopDeleted {
		r.reason = reason
	}
	r.mu.Unlock()
	r.cancel()
}

func (r *podRunner) stopState() (stopReason, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reason, r.grace
}

func (r *podRunner) markDirty() {
	select {
	case r.dirty <- struct{}{}:
	default:
	}
}

// run plays the pod until its containers are done or it is stopped, then leaves the
// pod as the kubelet would: reported, and removed when it was deleted.
func (r *podRunner) run(ctx context.Context) {
	r.log.Info("starting pod", "node", r.pod.Spec.NodeName, "containers", r.describeContainers())
	statusDone := make(chan struct{})
	statusExited := make(chan struct{})
	go func() {
		defer close(statusExited)
		r.statusLoop(ctx, statusDone)
	}()

	r.execute(ctx)

	close(statusDone)
	<-statusExited
	reason, _ := r.stopState()
	if reason == stopShutdown || reason == stopGone {
		r.log.Info("pod stopped", "why", map[stopReason]string{stopShutdown: "agent exiting", stopGone: "pod gone"}[reason])
		if reason == stopGone {
			_ = os.RemoveAll(r.dir)
		}
		return
	}
	r.writeStatus(ctx)
	r.log.Info("pod finished", "phase", r.currentPhase())
	if reason == stopDeleted {
		if err := r.a.forceDelete(ctx, r.pod); err != nil {
			// The agent retries from the pod's next event or resync.
			r.log.Warn("cannot remove deleted pod", "err", err)
		}
		_ = os.RemoveAll(r.dir)
	}
}

func (r *podRunner) describeContainers() string {
	var parts []string
	for _, c := range r.runs {
		parts = append(parts, c.spec.c.Name+"="+c.spec.kind.String())
	}
	return strings.Join(parts, ",")
}

func (r *podRunner) currentPhase() corev1.PodPhase {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.phase
}

func (r *podRunner) setPhase(p corev1.PodPhase, why, msg string) {
	r.mu.Lock()
	r.phase, r.statusWhy, r.statusMsg = p, why, msg
	r.mu.Unlock()
	r.markDirty()
}

// execute runs init containers, then main containers, and sets the pod's phase.
func (r *podRunner) execute(ctx context.Context) {
	if r.pod.Status.Phase == corev1.PodRunning && !r.adoptLostPod() {
		return
	}
	envs, ok := r.prepare(ctx)
	if !ok {
		return
	}
	if r.net != nil {
		err := r.netErr
		if err == nil {
			err = r.net.serve(r.stopCtx)
		}
		if err != nil {
			r.setPhase(corev1.PodFailed, "NetworkError", err.Error())
			return
		}
	}

	// Sidecars run until the main containers end, then stop like a kubelet stops them.
	sidecarCtx, stopSidecars := context.WithCancel(r.stopCtx)
	var sidecars sync.WaitGroup
	defer func() {
		stopSidecars()
		sidecars.Wait()
	}()

	initPolicy := corev1.RestartPolicyOnFailure
	if r.pod.Spec.RestartPolicy == corev1.RestartPolicyNever {
		initPolicy = corev1.RestartPolicyNever
	}
	var mains []*containerRun
	for _, c := range r.runs {
		switch {
		case !c.spec.init:
			mains = append(mains, c)
		case c.spec.sidecar:
			sidecars.Add(1)
			go func() {
				defer sidecars.Done()
				r.supervise(sidecarCtx, c, corev1.RestartPolicyAlways, envs[c.spec.c.Name])
			}()
		default:
			code := r.supervise(r.stopCtx, c, initPolicy, envs[c.spec.c.Name])
			if r.stopCtx.Err() != nil {
				r.finalPhase()
				return
			}
			if code != 0 {
				r.setPhase(corev1.PodFailed, "", fmt.Sprintf("init container %s failed with exit code %d", c.spec.c.Name, code))
				return
			}
		}
	}

	r.mu.Lock()
	r.initialized = true
	r.phase = corev1.PodRunning
	var processes sync.WaitGroup
	hasProcesses := false
	for _, c := range mains {
		if c.spec.kind != KindStandIn {
			processes.Add(1)
			hasProcesses = true
		}
	}
	if hasProcesses {
		r.mainsDone = make(chan struct{})
		go func() { processes.Wait(); close(r.mainsDone) }()
	}
	r.mu.Unlock()
	r.markDirty()

	var all sync.WaitGroup
	for _, c := range mains {
		all.Add(1)
		go func() {
			defer all.Done()
			if c.spec.kind != KindStandIn {
				defer processes.Done()
			}
			r.supervise(r.stopCtx, c, r.pod.Spec.RestartPolicy, envs[c.spec.c.Name])
		}()
	}
	all.Wait()
	r.finalPhase()
}

// finalPhase sets Succeeded when every main container exited 0, else Failed; that is
// also what a kubelet reports for a pod deleted while running.
func (r *podRunner) finalPhase() {
	r.mu.Lock()
	phase := corev1.PodSucceeded
	for _, c := range r.runs {
		if c.spec.init {
			continue
		}
		if c.state.Terminated == nil || c.exitCode() != 0 {
			phase = corev1.PodFailed
		}
	}
	r.mu.Unlock()
	r.setPhase(phase, "", "")
}

// adoptLostPod handles a pod that an earlier agent had running: its processes died
// with that agent. A pod that may restart containers gets them restarted; one that
// may not fails, as it would on a real node that lost its containers.
func (r *podRunner) adoptLostPod() bool {
	restarts := map[string]int32{}
	for _, st := range append(append([]corev1.ContainerStatus{}, r.pod.Status.InitContainerStatuses...), r.pod.Status.ContainerStatuses...) {
		restarts[st.Name] = st.RestartCount
	}
	if r.pod.Spec.RestartPolicy == corev1.RestartPolicyNever {
		r.log.Warn("pod was running under an earlier agent and cannot restart; failing it")
		r.mu.Lock()
		for _, c := range r.runs {
			c.restarts = restarts[c.spec.c.Name]
			c.state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 137, Reason: "ContainerLost", FinishedAt: metav1.Now().Rfc3339Copy(),
			}}
		}
		r.mu.Unlock()
		r.setPhase(corev1.PodFailed, "ContainerLost", "the test-bed agent restarted while the pod ran")
		return false
	}
	r.log.Info("pod was running under an earlier agent; restarting its containers")
	r.mu.Lock()
	for _, c := range r.runs {
		c.restarts = restarts[c.spec.c.Name] + 1
	}
	r.mu.Unlock()
	return true
}

// prepare resolves every container's environment and the pod's token, retrying
// while a referenced object is missing (the kubelet's CreateContainerConfigError).
func (r *podRunner) prepare(ctx context.Context) (map[string]*Env, bool) {
	delay := time.Second
	for {
		envs, err := r.resolveAll(ctx)
		if err == nil {
			return envs, true
		}
		reason := "CreateContainerError"
		var ce *ConfigError
		if errors.As(err, &ce) {
			reason = "CreateContainerConfigError"
		}
		r.log.Warn("cannot prepare containers, retrying", "reason", reason, "err", err)
		r.mu.Lock()
		for _, c := range r.runs {
			c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: err.Error()}}
		}
		r.mu.Unlock()
		r.markDirty()
		select {
		case <-r.stopCtx.Done():
			r.finalPhase()
			return nil, false
		case <-time.After(delay):
		}
		delay = min(2*delay, 10*time.Second)
	}
}

func (r *podRunner) resolveAll(ctx context.Context) (map[string]*Env, error) {
	kubeconfig := ""
	want, err := wantsToken(ctx, r.a.cfg.Client, r.pod)
	if err != nil {
		return nil, err
	}
	if want {
		if kubeconfig, err = r.writeCredentials(ctx); err != nil {
			return nil, err
		}
	}
	res := newEnvResolver(r.a.cfg.Client, r.pod)
	envs := map[string]*Env{}
	for _, c := range r.runs {
		dir := filepath.Join(r.dir, c.spec.c.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		env := &Env{}
		env.Set("PATH", os.Getenv("PATH"))
		env.Set("HOME", dir)
		env.Set("HOSTNAME", r.pod.Name)
		switch c.spec.kind {
		case KindSteeredRunner:
			env.Merge(r.a.runnerEnv)
		case KindGiteaRunner:
			// As in the image: gitea-runner on the PATH, and the bed's runner
			// config unless the pod names its own (the pod's env wins).
			env.Set("PATH", r.a.giteaRunnerFor(c.spec.c.Image).dir+string(os.PathListSeparator)+os.Getenv("PATH"))
			if r.a.cfg.GiteaRunnerConfig != "" {
				env.Set("CONFIG_FILE", r.a.cfg.GiteaRunnerConfig)
			}
		}
		podEnv, err := res.resolve(ctx, c.spec.c)
		if err != nil {
			return nil, err
		}
		env.Merge(podEnv)
		mounts, err := mountVolumes(ctx, r.a.cfg.Client, r.pod, c.spec.c, filepath.Join(dir, "volumes"), r.dir)
		if err != nil {
			return nil, err
		}
		rewriteMountPaths(env, mounts)
		c.mounts = mounts
		if kubeconfig != "" {
			// The pod's own client config: its ServiceAccount, so RBAC applies as in a cluster.
			env.Set("KUBECONFIG", kubeconfig)
		}
		envs[c.spec.c.Name] = env
	}
	return envs, nil
}

// writeCredentials mints the pod's token, writes it with a kubeconfig that uses it,
// and keeps the token fresh while the pod lives. It returns the kubeconfig's path.
func (r *podRunner) writeCredentials(ctx context.Context) (string, error) {
	ttl := int64(r.a.cfg.TokenTTL / time.Second)
	token, err := mintToken(ctx, r.a.cfg.Client, r.pod, ttl)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return "", err
	}
	tokenFile := filepath.Join(r.dir, "token")
	if err := writeFileAtomic(tokenFile, []byte(token), 0o600); err != nil {
		return "", err
	}
	kubeconfig := filepath.Join(r.dir, "kubeconfig")
	if err := writeFileAtomic(kubeconfig, podKubeconfig(r.a.cfg.APIServer, r.a.cfg.CAFile, tokenFile, r.pod.Namespace), 0o600); err != nil {
		return "", err
	}
	r.log.Info("minted service-account token", "serviceaccount", serviceAccountName(r.pod), "ttl", r.a.cfg.TokenTTL)
	go func() {
		// Refresh at 80% of the lifetime, like the kubelet, while the pod runs.
		t := time.NewTicker(r.a.cfg.TokenTTL * 4 / 5)
		defer t.Stop()
		for {
			select {
			case <-r.stopCtx.Done():
				return
			case <-t.C:
				token, err := mintToken(ctx, r.a.cfg.Client, r.pod, ttl)
				if err == nil {
					err = writeFileAtomic(tokenFile, []byte(token), 0o600)
				}
				if err != nil {
					r.log.Warn("cannot refresh service-account token", "err", err)
				}
			}
		}
	}()
	return kubeconfig, nil
}

// supervise runs a container and restarts it as the restart policy says, with a
// doubling back-off. It returns the last exit code.
func (r *podRunner) supervise(ctx context.Context, c *containerRun, policy corev1.RestartPolicy, env *Env) int32 {
	backoff := r.a.cfg.BackoffBase
	for {
		code := r.runOnce(ctx, c, env)
		if ctx.Err() != nil {
			return code
		}
		restart := policy == corev1.RestartPolicyAlways || (policy == corev1.RestartPolicyOnFailure && code != 0)
		if !restart {
			return code
		}
		r.log.Info("container ended, restarting after back-off", "container", c.spec.c.Name, "exit_code", code, "backoff", backoff)
		r.mu.Lock()
		c.last = c.state
		c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason:  "CrashLoopBackOff",
			Message: fmt.Sprintf("back-off %s restarting container %s", backoff, c.spec.c.Name),
		}}
		r.mu.Unlock()
		r.markDirty()
		select {
		case <-ctx.Done():
			r.mu.Lock()
			c.state, c.last = c.last, corev1.ContainerState{}
			r.mu.Unlock()
			return code
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, r.a.cfg.BackoffMax)
		r.mu.Lock()
		c.restarts++
		r.mu.Unlock()
	}
}

func (r *podRunner) setRunning(c *containerRun) {
	r.mu.Lock()
	c.state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now().Rfc3339Copy()}}
	r.mu.Unlock()
	r.markDirty()
}

func (r *podRunner) setTerminated(c *containerRun, code int32, reason, msg string) {
	r.mu.Lock()
	var started metav1.Time
	if c.state.Running != nil {
		started = c.state.Running.StartedAt
	}
	if reason == "" {
		reason = "Completed"
		if code != 0 {
			reason = "Error"
		}
	}
	c.state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: code, Reason: reason, Message: msg, StartedAt: started, FinishedAt: metav1.Now().Rfc3339Copy(),
	}}
	r.mu.Unlock()
	r.markDirty()
}

func (r *podRunner) runOnce(ctx context.Context, c *containerRun, env *Env) int32 {
	if c.spec.kind == KindStandIn {
		return r.runStandIn(ctx, c)
	}
	return r.runProcess(ctx, c, env)
}

// runStandIn plays an image with no local binary. An init container completes at
// once; a sidecar runs until stopped; a main container runs until the process-backed
// main containers have ended (then exits 0), the exit-after annotation fires, or the
// pod is stopped.
func (r *podRunner) runStandIn(ctx context.Context, c *containerRun) int32 {
	r.setRunning(c)
	if c.spec.init && !c.spec.sidecar {
		r.setTerminated(c, 0, "", "")
		return 0
	}
	var mainsDone <-chan struct{}
	var timer <-chan time.Time
	exitCode := int32(0)
	if !c.spec.init {
		r.mu.Lock()
		mainsDone = r.mainsDone
		r.mu.Unlock()
		if d, err := time.ParseDuration(r.pod.Annotations[AnnotationExitAfter]); err == nil {
			t := time.NewTimer(d)
			defer t.Stop()
			timer = t.C
			if n, err := strconv.Atoi(r.pod.Annotations[AnnotationExitCode]); err == nil {
				exitCode = int32(n)
			}
		}
	}
	select {
	case <-ctx.Done():
		r.setTerminated(c, exitSIGTERM, "", "")
		return exitSIGTERM
	case <-mainsDone:
		r.setTerminated(c, 0, "", "")
		return 0
	case <-timer:
		r.setTerminated(c, exitCode, "", "")
		return exitCode
	}
}

// runProcess runs one instance of a container as a local process in its own process
// group, writing its output to the pod's log file. Stopping sends SIGTERM to the
// process, as the kubelet does to a container's main process, and SIGKILL to the
// group after the grace period.
func (r *podRunner) runProcess(ctx context.Context, c *containerRun, env *Env) int32 {
	name := c.spec.c.Name
	bin := Binaries{Scaler: r.a.cfg.ScalerBin, SteeredRunner: r.a.cfg.SteeredRunnerBin, GiteaRunner: filepath.Join(r.a.giteaRunnerFor(c.spec.c.Image).dir, GiteaRunnerCommand)}
	if c.spec.kind == KindGiteaRunner && !RunsGiteaRunnerCommand(c.spec.kind, c.spec.c.Command) {
		var err error
		if bin.Entrypoint, env, err = r.freshRunnerLayer(c, env); err != nil {
			r.log.Warn("cannot prepare the runner's entrypoint", "container", name, "err", err)
			r.setTerminated(c, exitStartError, "StartError", err.Error())
			return exitStartError
		}
	}
	argv := ProcessArgv(c.spec.kind, ExpandAll(c.spec.c.Command, env), ExpandAll(c.spec.c.Args, env), bin)
	logPath := filepath.Join(r.a.cfg.LogDir, fmt.Sprintf("%s_%s_%s.log", r.pod.Namespace, r.pod.Name, name))
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		r.setTerminated(c, exitStartError, "StartError", err.Error())
		return exitStartError
	}
	defer logf.Close()
	r.mu.Lock()
	restarts := c.restarts
	r.mu.Unlock()

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env.List()
	cmd.Dir = filepath.Join(r.dir, name)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own group, so stopping reaches the process's children; Pdeathsig, so a killed
	// agent leaves no orphans.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if r.net != nil {
		newNetnsAttr(cmd.SysProcAttr)
	}
	if err := cmd.Start(); err != nil {
		r.log.Warn("cannot start container", "container", name, "argv0", argv[0], "err", err)
		fmt.Fprintf(logf, "testbed-agent: cannot start %s: %v\n", argv[0], err)
		r.setTerminated(c, exitStartError, "StartError", err.Error())
		return exitStartError
	}
	pid := cmd.Process.Pid
	if r.net != nil {
		if err := loopbackUp(pid); err != nil {
			r.log.Warn("cannot set lo up in the container's network namespace", "container", name, "err", err)
		}
		if !c.spec.init {
			r.net.setPID(pid)
			defer r.net.setPID(0)
		}
	}
	r.log.Info("container started", "container", name, "kind", c.spec.kind.String(), "pid", pid, "argv", argv, "restarts", restarts, "log", logPath)
	r.setRunning(c)

	waitc := make(chan error, 1)
	go func() { waitc <- cmd.Wait() }()
	select {
	case <-waitc:
	case <-ctx.Done():
		_, grace := r.stopState()
		r.log.Info("stopping container", "container", name, "pid", pid, "grace", grace)
		// The kubelet signals a container's main process (its PID 1), not
		// every process in it: a runner must see SIGTERM while its job's
		// steps still run, to cancel and report them itself.
		_ = syscall.Kill(pid, syscall.SIGTERM)
		t := time.NewTimer(grace)
		select {
		case <-waitc:
			t.Stop()
		case <-t.C:
			r.log.Warn("container ignored SIGTERM, killing", "container", name, "pid", pid)
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			<-waitc
		}
	}
	// Whatever the process left behind in its group goes with it.
	_ = syscall.Kill(-pid, syscall.SIGKILL)

	code := int32(cmd.ProcessState.ExitCode())
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int32(ws.Signal())
	}
	r.log.Info("container exited", "container", name, "pid", pid, "exit_code", code)
	r.setTerminated(c, code, "", "")
	return code
}

// freshRunnerLayer gives a runner container start what a new container's writable
// layer gives it: an empty /data (so no .runner state file survives a restart, as the
// runner Job relies on) but for what the pod mounts under it (linkDataMounts) and an empty /tmp, both in the container's directory, and
// run.sh rewritten to use them. It returns the script's path and the env with TMPDIR.
func (r *podRunner) freshRunnerLayer(c *containerRun, env *Env) (string, *Env, error) {
	runScript := r.a.giteaRunnerFor(c.spec.c.Image).runScript
	if runScript == nil {
		return "", nil, errors.New("the agent was started without --gitea-runner-dir, so it cannot play a runner image")
	}
	dir := filepath.Join(r.dir, c.spec.c.Name)
	data, tmp := filepath.Join(dir, "data"), filepath.Join(dir, "tmp")
	for _, d := range []string{data, tmp} {
		if err := os.RemoveAll(d); err != nil {
			return "", nil, err
		}
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", nil, err
	}
	if err := linkDataMounts(data, c.mounts); err != nil {
		return "", nil, err
	}
	script, err := PrepareEntrypoint(runScript, data, tmp)
	if err != nil {
		return "", nil, err
	}
	p := filepath.Join(dir, "run.sh")
	if err := os.WriteFile(p, script, 0o755); err != nil {
		return "", nil, err
	}
	out := &Env{}
	out.Merge(env)
	out.Set("TMPDIR", tmp)
	return p, out, nil
}

// statusLoop writes the pod's status whenever it changed, until done is closed.
func (r *podRunner) statusLoop(ctx context.Context, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case <-r.dirty:
			if reason, _ := r.stopState(); reason == stopShutdown || reason == stopGone {
				continue
			}
			r.writeStatus(ctx)
		}
	}
}

// writeStatus brings the API's pod status in line with the runner's state, retrying
// on conflicts with a fresh copy of the pod.
func (r *podRunner) writeStatus(ctx context.Context) {
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	pods := r.a.cfg.Client.CoreV1().Pods(r.pod.Namespace)
	fresh := false
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		var cur *corev1.Pod
		var err error
		if !fresh {
			cur, err = r.a.podLister.Pods(r.pod.Namespace).Get(r.pod.Name)
			fresh = true
		} else {
			cur, err = pods.Get(ctx, r.pod.Name, metav1.GetOptions{})
		}
		if err != nil {
			return err
		}
		if cur.UID != r.pod.UID {
			return nil
		}
		status := r.buildStatus(&cur.Status)
		if apiequality.Semantic.DeepEqual(status, cur.Status) {
			return nil
		}
		update := cur.DeepCopy()
		update.Status = status
		_, err = pods.UpdateStatus(ctx, update, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		r.log.Warn("cannot update pod status, will retry", "err", err)
		time.AfterFunc(2*time.Second, r.markDirty)
	}
}

// buildStatus renders the runner's state over the pod's current status, keeping what
// others own (the scheduler's condition, the QoS class).
func (r *podRunner) buildStatus(cur *corev1.PodStatus) corev1.PodStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := *cur.DeepCopy()
	st.Phase = r.phase
	st.Reason, st.Message = r.statusWhy, r.statusMsg
	st.HostIP, st.PodIP = PodIP, PodIP
	st.HostIPs = []corev1.HostIP{{IP: PodIP}}
	st.PodIPs = []corev1.PodIP{{IP: PodIP}}
	st.StartTime = &r.startTime
	st.InitContainerStatuses, st.ContainerStatuses = nil, nil

	terminal := r.phase == corev1.PodSucceeded || r.phase == corev1.PodFailed
	ready := !terminal && r.initialized
	var unready []string
	for _, c := range r.runs {
		s := r.containerStatus(c)
		if c.spec.init {
			st.InitContainerStatuses = append(st.InitContainerStatuses, s)
			if c.spec.sidecar && !s.Ready {
				unready = append(unready, s.Name)
			}
			continue
		}
		st.ContainerStatuses = append(st.ContainerStatuses, s)
		if !s.Ready {
			unready = append(unready, s.Name)
		}
	}
	ready = ready && len(unready) == 0

	setCondition(&st, corev1.PodReadyToStartContainers, true, "", "")
	initialized := r.initialized || !r.hasInitContainers()
	setCondition(&st, corev1.PodInitialized, initialized, "ContainersNotInitialized", "")
	why, msg := "ContainersNotReady", fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))
	if terminal {
		why, msg = "PodCompleted", ""
	}
	setCondition(&st, corev1.ContainersReady, ready, why, msg)
	setCondition(&st, corev1.PodReady, ready, why, msg)
	return st
}

func (r *podRunner) hasInitContainers() bool {
	for _, c := range r.runs {
		if c.spec.init && !c.spec.sidecar {
			return true
		}
	}
	return false
}

func (r *podRunner) containerStatus(c *containerRun) corev1.ContainerStatus {
	running := c.state.Running != nil
	s := corev1.ContainerStatus{
		Name:                 c.spec.c.Name,
		Image:                c.spec.c.Image,
		ImageID:              "testbed://" + c.spec.c.Image,
		RestartCount:         c.restarts,
		State:                *c.state.DeepCopy(),
		LastTerminationState: *c.last.DeepCopy(),
		Ready:                running,
		Started:              &running,
	}
	if running || c.state.Terminated != nil {
		s.ContainerID = fmt.Sprintf("testbed://%s/%s/%d", r.pod.UID, c.spec.c.Name, c.restarts)
	}
	return s
}

// setCondition sets a condition, keeping its transition time while its status holds.
func setCondition(st *corev1.PodStatus, t corev1.PodConditionType, ok bool, falseReason, falseMsg string) {
	cond := corev1.PodCondition{Type: t, Status: corev1.ConditionTrue}
	if !ok {
		cond.Status, cond.Reason, cond.Message = corev1.ConditionFalse, falseReason, falseMsg
	}
	for i := range st.Conditions {
		if st.Conditions[i].Type != t {
			continue
		}
		cond.LastTransitionTime = st.Conditions[i].LastTransitionTime
		if st.Conditions[i].Status != cond.Status {
			cond.LastTransitionTime = metav1.Now().Rfc3339Copy()
		}
		st.Conditions[i] = cond
		return
	}
	cond.LastTransitionTime = metav1.Now().Rfc3339Copy()
	st.Conditions = append(st.Conditions, cond)
}

// linkDataMounts puts in data what the container mounts under /data: a
// runner the scaler registered finds its .runner there, from its Secret, and
// run.sh then starts the daemon without registering.
func linkDataMounts(data string, mounts map[string]string) error {
	for p, src := range mounts {
		rel, ok := strings.CutPrefix(p, runnerDataDir+"/")
		if !ok {
			continue
		}
		dst := filepath.Join(data, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(src, dst); err != nil {
			return err
		}
	}
	return nil
}
