package scaler

import (
	"context"
	"crypto/sha256"
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
)

// listingKey names one Gitea listing that groups can share: the same Gitea
// URL (as the spec spells it: the client is made from it), the same API
// token and the same place see the same jobs. The token is
// compared by its SHA-256, so the key holds no copy of it; the key is
// never logged.
//
// Groups whose targets nest (a repo inside an org another group lists) do
// not reuse the wider listing: each target is listed on its own, so a
// misspelt repository still fails its group with GiteaNotFound instead of
// showing an empty queue, and a token that may list the repo but not the
// org keeps working.
type listingKey struct {
	url    string
	token  [sha256.Size]byte
	target scope.Place
}

// newListingKey is the key of a group's listing.
func newListingKey(spec *v1alpha1.RunnerGroupSpec, token string) listingKey {
	return listingKey{url: spec.Gitea.URL, token: sha256.Sum256([]byte(token)), target: scope.Of(spec)}
}

// gathered is what a pass reads once and its groups share (see gather).
// It is written by gather and only read afterwards, except runners, which
// fills as the lifecycle steps ask.
type gathered struct {
	namespaces map[string]*namespaceView
	listings   map[listingKey]*sharedListing
	// runners are the runners listings the lifecycle steps ask for, one
	// per listingKey.
	runners shareOnce[listingKey, []gitea.Runner]
	// ready delivers each listing's key as its answer comes in (issue
	// 25.7: a group is served as soon as its own listing is in, whatever
	// other targets' listings do); wait waits for every listing.
	ready chan listingKey
	wait  sync.WaitGroup
	// byGiteaJob indexes the gathered runner Jobs of every namespace by
	// their Gitea job ID, built on first use.
	indexOnce  sync.Once
	byGiteaJob map[int64][]*batchv1.Job
}

// namespaceView is a namespace's runner Jobs and pods, listed once.
type namespaceView struct {
	jobs    []batchv1.Job
	jobsErr error
	pods    map[types.UID]podView
	podsErr error
}

// sharedListing is one Gitea listing and when it was asked. The listing
// is read in the background; done is closed once snap and err are set.
type sharedListing struct {
	done    chan struct{}
	askedAt time.Time
	snap    gitea.Snapshot
	err     error
}

// gather reads, before any group plans, what several groups would
// otherwise each read: the state ConfigMaps, runner Jobs and pods of every
// namespace once (three requests per namespace instead of three per
// group), then starts every distinct Gitea listing once, up to
// Config.GiteaConcurrency at a time, in the background: a group waits for
// its own listing only, and is served as soon as it is in. It keeps the
// order a lone group's claim step reads in: the group's state ConfigMap, then the runner Jobs,
// then Gitea. A runner Job seen finished had its Gitea job finished before the
// listing, so no listing shows as queued a job whose runner is gone; and
// the state is written back only if no pass changed it since it was read.
func (s *Scaler) gather(ctx context.Context, runs []*groupRun) *gathered {
	out := &gathered{namespaces: map[string]*namespaceView{}, listings: map[listingKey]*sharedListing{}}
	clients := map[listingKey]gitea.Client{}
	var keys []listingKey
	var namespaces []string
	for _, g := range runs {
		if g.invalid != nil {
			continue
		}
		if _, ok := out.namespaces[g.rg.Namespace]; !ok {
			out.namespaces[g.rg.Namespace] = &namespaceView{}
			namespaces = append(namespaces, g.rg.Namespace)
		}
		if _, ok := clients[g.key]; !ok {
			clients[g.key] = g.gitea
			keys = append(keys, g.key)
		}
	}
	// The state first: a Jobs list older than the state read could miss a
	// runner Job whose claim another pass has already dropped from the
	// state (it drops a claim once its Job is listed), and plan a second
	// runner for that job. So each namespace's states are read before its
	// Jobs.
	byNamespace := map[string][]*groupRun{}
	for _, g := range runs {
		if g.invalid == nil {
			byNamespace[g.rg.Namespace] = append(byNamespace[g.rg.Namespace], g)
		}
	}
	nsViews := make([]*namespaceView, len(namespaces))
	wide := s.readClusterWide(ctx, len(namespaces))
	forEach(len(namespaces), s.cfg.Workers, func(i int) {
		groups := byNamespace[namespaces[i]]
		// A loop reads the namespace from its watch caches, where it may
		// keep them; its groups' claim step then reads afresh before
		// any write that stale data could make wrong (see claim).
		f := groups[0].namespaces.facts(ctx, s, namespaces[i])
		if v, ok := s.watchedView(ctx, namespaces[i], f.canWatch); ok {
			s.preloadStates(ctx, groups, listedStates(v), nil, true)
			nsViews[i] = &namespaceView{jobs: v.Jobs, pods: podViews(v.Pods)}
			return
		}
		if wide != nil {
			// Listed cluster-wide, states first, as below.
			s.preloadStates(ctx, groups, wide.states[namespaces[i]], nil, false)
			nsViews[i] = &namespaceView{jobs: wide.jobs[namespaces[i]], pods: podViews(wide.pods[namespaces[i]])}
			return
		}
		s.loadStates(ctx, namespaces[i], groups)
		ctx, cancel := context.WithTimeout(ctx, s.cfg.GroupTimeout)
		defer cancel()
		nsViews[i] = s.readNamespace(ctx, namespaces[i])
	})
	for i, n := range namespaces {
		out.namespaces[n] = nsViews[i]
	}
	// The listings run in the background, up to GiteaConcurrency at a
	// time, started in the order of runs (the pass's rotated order); each
	// group waits for its own (see read), and the pass serves groups as
	// their listings come in (servingOrder).
	out.ready = make(chan listingKey, len(keys))
	for _, k := range keys {
		out.listings[k] = &sharedListing{done: make(chan struct{})}
	}
	out.wait.Add(len(keys))
	slots := make(chan struct{}, max(s.cfg.GiteaConcurrency, 1))
	go func() {
		for _, k := range keys {
			slots <- struct{}{}
			go func() {
				defer out.wait.Done()
				defer func() { <-slots }()
				ctx, cancel := context.WithTimeout(ctx, s.cfg.GroupTimeout)
				defer cancel()
				l := out.listings[k]
				l.askedAt = s.now()
				l.snap, l.err = clients[k].Snapshot(ctx, k.target)
				warnUnlisted(s.log, k.target, l.snap)
				close(l.done)
				out.ready <- k
			}()
		}
	}()
	return out
}

// loadStates reads the state ConfigMaps of a namespace's groups for their
// first claim attempt: all with one list (by the label every state
// ConfigMap carries), so a steady pass reads them in one request per
// namespace, not one per group. A group whose ConfigMap the list lacks
// had none when the list was read, unless it was served before: then its
// ConfigMap was deleted or lost its label, and a read of its own tells
// which (a missing state is rebuilt from the runner Jobs, with a Warning;
// a merely unlabelled one is read as it is, and the next write puts the
// label back). When the list fails (a Role without list on ConfigMaps),
// each group reads its own, as it did before the list.
//
// Every read here comes before the namespace's Jobs list, and claim writes
// under the resourceVersion read, listed or not: a state that changed since
// is a conflict, and the plan is made again from fresh reads.
func (s *Scaler) loadStates(ctx context.Context, namespace string, groups []*groupRun) {
	lctx, cancel := context.WithTimeout(ctx, s.cfg.GroupTimeout)
	listed, err := state.Store{Client: s.kube}.List(lctx, namespace, v1alpha1.LabelRunnerGroupName)
	cancel()
	if err != nil {
		s.log.Warn("cannot list the state ConfigMaps; reading each group's own", "namespace", namespace, "error", err)
	}
	s.preloadStates(ctx, groups, listed, err, false)
}

// preloadStates gives each group its state from listed, or, when the list
// failed (listErr) or lacks a group served before, from a read of its own.
// cached says listed, and the namespace's runner Jobs the groups will
// observe, came from watch caches: the groups plan from them on their first
// attempt only as far as claim allows.
func (s *Scaler) preloadStates(ctx context.Context, groups []*groupRun, listed state.Listed, listErr error, cached bool) {
	err := listErr
	if err == nil {
		preloadLedger(ctx, groups, listed)
		if len(groups) > 0 {
			groups[0].namespaces.listConfigMaps(groups[0].rg.Namespace, listed)
		}
	}
	var own []*groupRun
	for _, g := range groups {
		g.fromCache = cached
	}
	for _, g := range groups {
		if err != nil {
			own = append(own, g)
			continue
		}
		loaded, ok, lerr := listed.Load(g.owner)
		switch {
		case ok:
			g.preloaded, g.preloadErr = loaded, claimsError(lerr)
		case g.rg.Status.LastCheckTime == nil:
			g.preloaded = state.Loaded{Claims: state.Claims{}}
		default:
			own = append(own, g)
			continue
		}
		g.hasPreload = true
	}
	forEach(len(own), s.cfg.Workers, func(i int) {
		g := own[i]
		ctx, cancel := context.WithTimeout(ctx, s.cfg.GroupTimeout)
		defer cancel()
		g.preloaded, g.preloadErr = s.loadClaims(ctx, g)
		g.hasPreload = true
	})
}

// readNamespace lists every runner Job and runner pod of a namespace. The
// pods only tell about the Jobs listed before them, so a namespace with no
// runner Job has no pods to list: most of a large install's namespaces, in
// a steady pass.
func (s *Scaler) readNamespace(ctx context.Context, namespace string) *namespaceView {
	v := &namespaceView{}
	anyGroup := metav1.ListOptions{LabelSelector: v1alpha1.LabelRunnerGroupName}
	list, err := s.kube.BatchV1().Jobs(namespace).List(ctx, anyGroup)
	if err != nil {
		v.jobsErr = err
	} else {
		v.jobs = list.Items
	}
	if err == nil && len(v.jobs) == 0 {
		v.pods = map[types.UID]podView{}
		return v
	}
	pods, err := s.kube.CoreV1().Pods(namespace).List(ctx, anyGroup)
	if err != nil {
		v.podsErr = err
	} else {
		v.pods = podViews(pods.Items)
	}
	return v
}

// servingOrder delivers the indexes of runs as workers take them: each
// time, the first group in the order of runs that waits for no listing
// (its own is in, or it failed to validate), so
// the pass's rotated order holds among the groups that can go, and no
// group waits behind another's slow listing. When none can go, it waits
// for the next listing. The channel is closed after the last group.
func (d *gathered) servingOrder(runs []*groupRun) <-chan int {
	order := make(chan int)
	arrived := d.ready
	canGo := func(i int) bool {
		g := runs[i]
		if g.invalid != nil || d.listings[g.key] == nil {
			return true
		}
		select {
		case <-d.listings[g.key].done:
			return true
		default:
			return false
		}
	}
	go func() {
		defer close(order)
		left := make([]int, len(runs))
		for i := range left {
			left[i] = i
		}
		for len(left) > 0 {
			pick := slices.IndexFunc(left, canGo)
			if pick < 0 {
				<-arrived
				continue
			}
			select {
			case order <- left[pick]:
				left = slices.Delete(left, pick, pick+1)
			case <-arrived:
				// Look again: a group before it may go now.
			}
		}
	}()
	return order
}

// namespace is the pass's view of a namespace, nil when the pass did not
// gather (a group served on its own) or the namespace was not gathered.
func (d *gathered) namespace(ns string) *namespaceView {
	if d == nil {
		return nil
	}
	return d.namespaces[ns]
}

// listing is the pass's listing of key, nil when there is none.
func (d *gathered) listing(key listingKey) *sharedListing {
	if d == nil {
		return nil
	}
	return d.listings[key]
}

// runnersFor are the gathered runner Jobs, of any group and namespace,
// started for Gitea job id; none when the pass did not gather.
func (d *gathered) runnersFor(id int64) []*batchv1.Job {
	if d == nil {
		return nil
	}
	d.indexOnce.Do(func() {
		d.byGiteaJob = map[int64][]*batchv1.Job{}
		for _, v := range d.namespaces {
			for i := range v.jobs {
				j := &v.jobs[i]
				d.byGiteaJob[runnerjob.GiteaJobID(j)] = append(d.byGiteaJob[runnerjob.GiteaJobID(j)], j)
			}
		}
	})
	return d.byGiteaJob[id]
}

// groupJobs are the Jobs of one group among a namespace's runner Jobs.
func groupJobs(rg *v1alpha1.RunnerGroup, all []batchv1.Job) []batchv1.Job {
	out := all[:0:0]
	for i := range all {
		if all[i].Labels[v1alpha1.LabelRunnerGroupName] == rg.Name {
			out = append(out, all[i])
		}
	}
	return out
}

// shareOnce holds answers a pass reads once for many groups: the first
// caller of a key fetches, later callers of the key wait for its answer.
// Only an answer is shared: the first caller's failure may be its own
// deadline, so a caller that waited for a failure fetches for itself.
type shareOnce[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]*onceEntry[V]
}

type onceEntry[V any] struct {
	done chan struct{}
	val  V
	err  error
}

// get returns key's answer, fetching it on the first call.
func (o *shareOnce[K, V]) get(ctx context.Context, key K, fetch func(context.Context) (V, error)) (V, error) {
	o.mu.Lock()
	if o.m == nil {
		o.m = map[K]*onceEntry[V]{}
	}
	e, ok := o.m[key]
	if !ok {
		e = &onceEntry[V]{done: make(chan struct{})}
		o.m[key] = e
	}
	o.mu.Unlock()
	if !ok {
		e.val, e.err = fetch(ctx)
		close(e.done)
		return e.val, e.err
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
	if e.err != nil {
		return fetch(ctx)
	}
	return e.val, nil
}

// forEach calls fn for 0..n-1 on at most limit goroutines (at least one).
func forEach(n, limit int, fn func(i int)) {
	var wg sync.WaitGroup
	work := make(chan int)
	for range min(max(limit, 1), max(n, 1)) {
		wg.Go(func() {
			for i := range work {
				fn(i)
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
}

// passSecrets holds the Secrets a pass has read, by namespace and name.
type passSecrets struct {
	once shareOnce[types.NamespacedName, *corev1.Secret]
}

// preload puts the named Secrets of namespace into read, each read from
// the Kubernetes API once per pass. A Secret that cannot be read is left
// out of read, so tokenrule.SecretKey reads it itself and reports why in the
// group's own words.
func (p *passSecrets) preload(ctx context.Context, s *Scaler, namespace string, read map[string]*corev1.Secret, names ...string) {
	for _, name := range names {
		if _, ok := read[name]; ok {
			continue
		}
		key := types.NamespacedName{Namespace: namespace, Name: name}
		sec, err := p.once.get(ctx, key, func(ctx context.Context) (*corev1.Secret, error) {
			if sec, ok := s.mem.rememberedSecret(key, s.now()); ok {
				return sec, nil
			}
			sec, err := s.kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
			if err == nil {
				s.mem.rememberSecret(sec, s.now())
			}
			return sec, err
		})
		if err == nil {
			read[name] = sec
		}
	}
}
