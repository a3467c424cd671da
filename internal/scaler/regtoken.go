package scaler

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/owned"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/reason"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// RegistrationTokenRecheck is how often the scaler asks Gitea again for a
// group's minted registration token.
//
// Why not every pass, and why not never: Gitea answers the scope's active
// token and makes one only when there is none, so the answer changes only
// when someone resets the token in Gitea (then runners with the old one
// fail to register). A runner that fails to register exits, its container
// restarts (restartPolicy OnFailure) and reads the Secret again, so once the
// Secret holds the new token the runners recover by themselves. Telling a
// failed registration apart would need the runner's logs (pods/log, a right
// the scaler does not ask for); asking Gitea every ten minutes costs one
// small POST per group and bounds how long a reset token goes unnoticed. A
// missing or empty Secret is minted at once.
const RegistrationTokenRecheck = 10 * time.Minute

// ensureRegistrationToken keeps the Secret <group>-registration-token with
// the scope's registration token, for a group without
// spec.registrationToken. The token is minted with the group's own API
// token, so a group gets no right through the scaler that its token does
// not hold; it only ever lands in the Secret, which the runner Jobs
// reference through secretKeyRef. A Secret of that name that the group does
// not own is never touched; read holds the Secrets the pass already read.
func (s *Scaler) ensureRegistrationToken(ctx context.Context, g *groupRun, read map[string]*corev1.Secret) error {
	rg := g.rg
	ref := rg.RegistrationTokenRef()
	now := s.now()
	var replaced bool
	res, err := owned.Ensure(ctx, s.kube.CoreV1().Secrets(rg.Namespace), rg, ref.Name, owned.Want[corev1.Secret, *corev1.Secret]{
		Have:   read[ref.Name],
		DryRun: s.cfg.DryRun,
		Desire: func(have *corev1.Secret) (*corev1.Secret, error) {
			if have != nil && len(have.Data[ref.Key]) > 0 && !recheckDue(have, now) {
				g.regToken = string(have.Data[ref.Key])
				return nil, nil
			}
			// Minting asks Gitea for a token, which a dry run does not.
			if s.cfg.DryRun {
				g.log.Info("dry run: would mint the registration token", "secret", ref.Name)
				return nil, nil
			}
			// The next pass reads what this one writes.
			s.mem.forgetSecret(rg.Namespace, ref.Name)
			token, err := s.mintRegistrationToken(ctx, g)
			if err != nil {
				return nil, err
			}
			replaced = have != nil && string(have.Data[ref.Key]) != token
			g.regToken = token
			return runnerjob.RegistrationTokenSecret(rg, token, now), nil
		},
	})
	switch {
	case owned.Raced(err):
		// Another pass wrote it at the same moment; the next pass checks
		// whose it is and what it holds.
		return nil
	case err != nil:
		return ownedObjectError(err, v1alpha1.ReasonRegistrationTokenNotOwned, "registration token",
			"so the scaler does not write it; delete or rename it, or set spec.registrationToken")
	case res == owned.Created:
		g.log.Info("minted the registration token", "secret", ref.Name)
	case res == owned.Updated && replaced:
		g.log.Info("replaced the registration token: Gitea answered another one", "secret", ref.Name)
	}
	return nil
}

// mintRegistrationToken asks Gitea, with the group's API token, for the
// registration token of the group's scope.
func (s *Scaler) mintRegistrationToken(ctx context.Context, g *groupRun) (string, error) {
	minter, ok := g.gitea.(gitea.Registration)
	if !ok {
		return "", reason.Errorf(v1alpha1.ReasonGiteaUnavailable, "registration token: the Gitea client cannot mint registration tokens")
	}
	token, err := minter.RegistrationToken(ctx, scope.Of(&g.rg.Spec))
	if err != nil {
		why := giteaReason(err)
		if errors.Is(err, gitea.ErrWrongUser) {
			why = v1alpha1.ReasonGiteaForbidden
		}
		return "", reason.Errorf(why, "registration token: cannot mint one for %s with spec.authToken: %w", scope.Of(&g.rg.Spec), err)
	}
	return token, nil
}

// recheckDue says whether the minted Secret's token should be asked of
// Gitea again: RegistrationTokenRecheck after the last check, or at once
// when the annotation is missing, unreadable or in the future (a clock
// that went back).
func recheckDue(sec *corev1.Secret, now time.Time) bool {
	at, err := time.Parse(time.RFC3339, sec.Annotations[v1alpha1.AnnotationRegistrationTokenChecked])
	if err != nil || at.After(now) {
		return true
	}
	return now.Sub(at) >= RegistrationTokenRecheck
}
