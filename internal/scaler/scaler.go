// Package scaler runs one pass: for every selected RunnerGroup it asks Gitea
// for queued jobs, claims the ones it will serve in the group's state
// ConfigMap, creates one runner Job per claim, and writes the group's status.
//
// A pass is short-lived and stateless apart from the ConfigMaps, so a
// CronJob pass, a manual `kubectl create job --from=cronjob/...` pass and a
// looping Deployment can all run at once: claims are written under the
// ConfigMap's resourceVersion before any Job is created, and a pass that
// loses the race re-reads everything and plans again.
package scaler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnergroups"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/selector"
)

// GroupClient reads RunnerGroups and writes their status.
type GroupClient interface {
	List(ctx context.Context, namespace, selector string) ([]v1alpha1.RunnerGroup, []runnergroups.Broken, error)
	PatchStatus(ctx context.Context, rg *v1alpha1.RunnerGroup) error
}

// GiteaFactory returns a Gitea client for one instance and API token.
type GiteaFactory func(baseURL, token string) (gitea.Client, error)

// Config is what the scaler's flags set.
type Config struct {
	// Namespaces to serve; empty serves all namespaces.
	Namespaces []string
	// Selector picks RunnerGroups by label, in either form package
	// selector reads; empty picks all.
	Selector string
	// ExcludeSelectors skip RunnerGroups that any of them matches (same
	// forms); an additional listener takes those groups.
	ExcludeSelectors []string
	// DryRun plans and prints, and writes nothing.
	DryRun bool
	// SpawnTTL is how long a claim keeps a queued job from a second runner.
	SpawnTTL time.Duration
	// Workers is how many groups are served at once.
	Workers int
	// Runner configures the runner Jobs.
	Runner runnerjob.Options
}

// Scaler runs passes.
type Scaler struct {
	Kube   kubernetes.Interface
	Groups GroupClient
	Gitea  GiteaFactory
	Log    *slog.Logger
	Config Config
	// Out receives the dry-run plan.
	Out io.Writer
	// Now and NewJobName are replaceable in tests.
	Now        func() time.Time
	NewJobName func(group string) string

	include  labels.Selector
	excludes []labels.Selector
}

// New checks the configuration and returns a scaler.
func New(s Scaler) (*Scaler, error) {
	var err error
	if s.include, err = selector.Parse(s.Config.Selector); err != nil {
		return nil, fmt.Errorf("invalid selector %q: %w", s.Config.Selector, err)
	}
	for _, raw := range s.Config.ExcludeSelectors {
		sel, err := selector.ParseExclude(raw)
		if err != nil {
			return nil, fmt.Errorf("invalid exclude selector %q: %w", raw, err)
		}
		s.excludes = append(s.excludes, sel)
	}
	if s.Config.Workers < 1 {
		s.Config.Workers = 1
	}
	if s.Config.SpawnTTL <= 0 {
		return nil, errors.New("the spawn TTL must be positive")
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.NewJobName == nil {
		s.NewJobName = runnerjob.NewName
	}
	if s.Out == nil {
		s.Out = io.Discard
	}
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
	return &s, nil
}

// Summary says how a pass went.
type Summary struct {
	// Groups counts the RunnerGroups served.
	Groups int
	// Failed names the groups that failed ("namespace/name").
	Failed []string
	// Created counts the runner Jobs created.
	Created int
}

// Err is non-nil when any group failed, so the pass's Job fails visibly in
// the CronJob's history.
func (s Summary) Err() error {
	if len(s.Failed) == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d RunnerGroups failed: %s", len(s.Failed), s.Groups, strings.Join(s.Failed, ", "))
}

// Pass serves every selected RunnerGroup once. It returns an error only when
// it could not find the groups at all; a group that fails is reported in the
// Summary and on the group's conditions, and the others go on.
func (s *Scaler) Pass(ctx context.Context) (Summary, error) {
	groups, broken, err := s.listGroups(ctx)
	if err != nil {
		return Summary{}, err
	}
	sum := Summary{Groups: len(groups) + len(broken)}
	for _, b := range broken {
		s.Log.Error("cannot read RunnerGroup", "runnergroup", b.Namespace+"/"+b.Name, "error", b.Err)
		sum.Failed = append(sum.Failed, b.Namespace+"/"+b.Name)
	}

	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		work = make(chan *v1alpha1.RunnerGroup)
	)
	for range min(s.Config.Workers, max(len(groups), 1)) {
		wg.Go(func() {
			for rg := range work {
				created, err := s.serve(ctx, rg)
				mu.Lock()
				sum.Created += created
				if err != nil {
					sum.Failed = append(sum.Failed, rg.Namespace+"/"+rg.Name)
				}
				mu.Unlock()
			}
		})
	}
	for i := range groups {
		work <- &groups[i]
	}
	close(work)
	wg.Wait()
	sort.Strings(sum.Failed)
	return sum, nil
}

func (s *Scaler) listGroups(ctx context.Context) ([]v1alpha1.RunnerGroup, []runnergroups.Broken, error) {
	namespaces := s.Config.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	var (
		out    []v1alpha1.RunnerGroup
		broken []runnergroups.Broken
	)
	for _, ns := range namespaces {
		groups, b, err := s.Groups.List(ctx, ns, s.include.String())
		if err != nil {
			return nil, nil, err
		}
		broken = append(broken, b...)
		for _, rg := range groups {
			if s.excluded(rg.Labels) {
				continue
			}
			out = append(out, rg)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out, broken, nil
}

func (s *Scaler) excluded(l map[string]string) bool {
	for _, sel := range s.excludes {
		if sel.Matches(labels.Set(l)) {
			return true
		}
	}
	return false
}
