package scaler

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/reason"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// regChecks remembers the verdicts of registration token checks, keyed by
// a digest of the Gitea URL, the target and both tokens, so that a
// listener's passes do not each ask Gitea, and a changed Secret is checked
// at once. A verdict is kept RegistrationTokenRecheck, which bounds how
// long a token reset in Gitea goes unnoticed.
type regChecks struct {
	mu   sync.Mutex
	seen map[[sha256.Size]byte]regVerdict
	// asking holds the checks in flight: groups of one pass that check the
	// same key at once (a pass serves several groups at a time) wait for
	// the one that asks instead of each asking Gitea.
	asking map[[sha256.Size]byte]chan struct{}
	// loaded says the kept verdicts were read (loadKeptChecks); unsaved
	// that a verdict was reached since they were last written.
	loaded, unsaved bool
}

// regVerdict is one check's outcome: match, or refused (the API token may
// not ask, which a retry does not change).
type regVerdict struct {
	at    time.Time
	match bool
	// scope is the scope whose token matched: where runners register.
	scope   scope.Place
	refused error
	// transient is a failure a retry may not repeat (Gitea slow or down):
	// that verdict is for the asking pass only and is not kept.
	transient error
}

// verdict is the kept verdict for key, or ask's, asked once for the
// groups that want it at the same time; a verdict with a transient
// failure is not kept, and a group that waited for it asks again itself.
func (r *regChecks) verdict(key [sha256.Size]byte, now time.Time, ask func() regVerdict) regVerdict {
	for {
		if v, ok := r.get(key, now); ok {
			return v
		}
		r.mu.Lock()
		if wait, busy := r.asking[key]; busy {
			r.mu.Unlock()
			<-wait
			if v, ok := r.get(key, now); ok {
				return v
			}
			r.mu.Lock()
			if _, busy := r.asking[key]; busy {
				r.mu.Unlock()
				continue
			}
		}
		if r.asking == nil {
			r.asking = map[[sha256.Size]byte]chan struct{}{}
		}
		done := make(chan struct{})
		r.asking[key] = done
		r.mu.Unlock()
		v := ask()
		if v.transient == nil {
			r.put(key, v)
		}
		r.mu.Lock()
		delete(r.asking, key)
		r.mu.Unlock()
		close(done)
		return v
	}
}

func (r *regChecks) get(key [sha256.Size]byte, now time.Time) (regVerdict, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.seen[key]
	if !ok || !stillGood(v.at, now) {
		return regVerdict{}, false
	}
	return v, true
}

func (r *regChecks) put(key [sha256.Size]byte, v regVerdict) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[[sha256.Size]byte]regVerdict{}
	}
	// Expired verdicts go, so the map holds at most the groups of the
	// last RegistrationTokenRecheck.
	for k, old := range r.seen {
		if v.at.Sub(old.at) >= RegistrationTokenRecheck {
			delete(r.seen, k)
		}
	}
	r.seen[key] = v
	r.unsaved = true
}

// startLoading says whether the kept verdicts are still to be read, and
// that they are being read now.
func (r *regChecks) startLoading() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := !r.loaded
	r.loaded = true
	return first
}

// merge adds kept verdicts newer than those known.
func (r *regChecks) merge(kept map[[sha256.Size]byte]regVerdict) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[[sha256.Size]byte]regVerdict{}
	}
	for k, v := range kept {
		if old, ok := r.seen[k]; !ok || v.at.After(old.at) {
			r.seen[k] = v
		}
	}
}

// changed says whether a verdict was reached since the last save.
func (r *regChecks) changed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unsaved
}

// snapshot is a copy of the verdicts known.
func (r *regChecks) snapshot() map[[sha256.Size]byte]regVerdict {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.seen)
}

// saved records that the verdicts known were written.
func (r *regChecks) saved() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unsaved = false
}

// checkRegistrationToken checks that the group's registration token (from
// spec.registrationToken) is the active one of its scope or of a scope
// that contains it (gitea.RegistrationCheck), with the group's API token:
// Gitea answers a scope's token only to who may manage its runners (site
// admin, org owner, repository owner, the user), and keeps one active
// token per scope, so a token that is none of them is another scope's or
// was reset, and runners given it never take this group's jobs. Such a
// group fails with RegistrationTokenNotForScope, which the assignment
// rule counts as unable to serve: it holds no job from a group that can.
// A group whose API token may not ask is served, and its condition says
// that only the assignment hold bounds how long it keeps another
// namespace's job. Neither token is ever part of a message.
func (s *Scaler) checkRegistrationToken(ctx context.Context, g *groupRun, apiToken, regToken string) error {
	rg := g.rg
	ref := rg.RegistrationTokenRef()
	target := scope.Of(&rg.Spec)
	where := fmt.Sprintf("the registration token in Secret %s/%s (key %q)", rg.Namespace, ref.Name, ref.Key)
	g.setPlace(target, false)
	unchecked := func(why error) {
		g.regCheck = &metav1.Condition{Type: v1alpha1.ConditionRegistrationToken, Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonRegistrationTokenUnchecked,
			Message: cutRunes(fmt.Sprintf("cannot tell whether %s is the active runner registration token of %s: %s; spec.authToken needs the right to manage that scope's runners for the check. Until then a queued job this group does not take goes to a group of another namespace after the assignmentHold",
				where, target, boundMessage(why)), maxMessageRunes)}
	}
	if s.cfg.DryRun {
		return nil
	}
	checker, ok := g.gitea.(gitea.RegistrationCheck)
	if !ok {
		unchecked(errors.New("the Gitea client cannot check registration tokens"))
		return nil
	}
	key := regCheckKey(rg.Spec.Gitea.URL, target, apiToken, regToken)
	now := s.now()
	v := g.checks.verdict(key, now, func() regVerdict {
		registersIn, match, err := checker.RegistrationScope(ctx, target, regToken)
		switch {
		case err == nil:
			return regVerdict{at: now, match: match, scope: registersIn}
		case errors.Is(err, gitea.ErrUnauthorized), errors.Is(err, gitea.ErrForbidden), errors.Is(err, gitea.ErrNotFound), errors.Is(err, gitea.ErrWrongUser):
			return regVerdict{at: now, refused: err}
		default:
			// Gitea is slow or down: unknown for this pass only; the
			// listing will say more, and the next pass asks again.
			return regVerdict{at: now, transient: err}
		}
	})
	switch {
	case v.transient != nil:
		unchecked(v.transient)
		return nil
	case v.refused != nil:
		unchecked(v.refused)
		return nil
	case v.match:
		g.setPlace(v.scope, true)
		msg := fmt.Sprintf("%s is the active runner registration token of %s (asked of Gitea with spec.authToken)", where, target)
		if v.scope != target {
			msg = fmt.Sprintf("%s is the active runner registration token of %s, which contains %s (asked of Gitea with spec.authToken): the group's runners register there, and Gitea may give them any job of %s whose labels they offer", where, v.scope, target, v.scope)
		}
		g.regCheck = &metav1.Condition{Type: v1alpha1.ConditionRegistrationToken, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonRegistrationTokenMatchesScope, Message: cutRunes(msg, maxMessageRunes)}
		return nil
	}
	msg := fmt.Sprintf("spec.registrationToken: %s is not the active runner registration token of %s, nor of a scope that contains it (Gitea answered those scopes' tokens to spec.authToken): it is another scope's, or was reset in Gitea, so runners would register elsewhere or not at all and the group serves nothing; put that scope's token in the Secret, or leave spec.registrationToken out to have the scaler mint it",
		where, target)
	g.regCheck = &metav1.Condition{Type: v1alpha1.ConditionRegistrationToken, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonRegistrationTokenNotForScope, Message: cutRunes(msg, maxMessageRunes)}
	return reason.Errorf(v1alpha1.ReasonRegistrationTokenNotForScope, "%s", msg)
}

// mintedRegistrationToken is the RegistrationToken condition of a group
// whose token the scaler mints: the scope's own by construction.
func mintedRegistrationToken(rg *v1alpha1.RunnerGroup) *metav1.Condition {
	return &metav1.Condition{Type: v1alpha1.ConditionRegistrationToken, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonRegistrationTokenMinted,
		Message: fmt.Sprintf("the scaler mints the registration token of %s with spec.authToken into Secret %s/%s", scope.Of(&rg.Spec), rg.Namespace, rg.RegistrationTokenRef().Name)}
}
