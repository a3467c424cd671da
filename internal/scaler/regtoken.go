package scaler

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/reason"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// AnnotationRegistrationTokenChecked is on a minted registration token
// Secret: when the scaler last asked Gitea for the scope's token (RFC 3339).
const AnnotationRegistrationTokenChecked = v1alpha1.Group + "/registration-token-checked"

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
// not own is never touched.
func (s *Scaler) ensureRegistrationToken(ctx context.Context, g *groupRun, read map[string]*corev1.Secret) error {
	rg := g.rg
	ref := rg.RegistrationTokenRef()
	secrets := s.kube.CoreV1().Secrets(rg.Namespace)
	sec, ok := read[ref.Name]
	if !ok {
		var err error
		sec, err = secrets.Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			sec = nil
		case err != nil:
			return reason.Errorf(v1alpha1.ReasonKubernetesError, "registration token: cannot read Secret %s/%s: %w", rg.Namespace, ref.Name, err)
		}
	}
	if sec != nil && !ownedByGroup(sec.OwnerReferences, rg) {
		return reason.Errorf(v1alpha1.ReasonRegistrationTokenNotOwned,
			"registration token: Secret %s/%s exists and is not owned by this RunnerGroup, so the scaler does not write it; delete or rename it, or set spec.registrationToken",
			rg.Namespace, ref.Name)
	}
	now := s.now()
	if sec != nil && len(sec.Data[ref.Key]) > 0 && !recheckDue(sec, now) {
		return nil
	}
	if s.cfg.DryRun {
		g.log.Info("dry run: would mint the registration token", "secret", ref.Name)
		return nil
	}
	// The next pass reads what this one writes.
	s.forgetSecret(rg.Namespace, ref.Name)
	minter, ok := g.gitea.(gitea.Registration)
	if !ok {
		return reason.Errorf(v1alpha1.ReasonGiteaUnavailable, "registration token: the Gitea client cannot mint registration tokens")
	}
	token, err := minter.RegistrationToken(ctx, gitea.TargetOf(&rg.Spec))
	if err != nil {
		why := giteaReason(err)
		if errors.Is(err, gitea.ErrWrongUser) {
			why = v1alpha1.ReasonGiteaForbidden
		}
		return reason.Errorf(why, "registration token: cannot mint one for %s with spec.authToken: %w", gitea.TargetOf(&rg.Spec), err)
	}
	checked := now.UTC().Format(time.RFC3339)
	if sec == nil {
		sec = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name:            ref.Name,
				Namespace:       rg.Namespace,
				Labels:          runnerjob.GroupLabels(rg.Name),
				Annotations:     map[string]string{AnnotationRegistrationTokenChecked: checked},
				OwnerReferences: []metav1.OwnerReference{rg.ControllerRef()},
			},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{ref.Key: []byte(token)},
		}
		_, err := secrets.Create(ctx, sec, metav1.CreateOptions{FieldManager: v1alpha1.FieldManager})
		switch {
		case apierrors.IsAlreadyExists(err):
			// Another pass made it at the same moment; the next pass
			// checks whose it is.
			return nil
		case err != nil:
			return reason.Errorf(v1alpha1.ReasonKubernetesError, "registration token: cannot create Secret %s/%s: %w", rg.Namespace, ref.Name, err)
		}
		g.log.Info("minted the registration token", "secret", ref.Name)
		return nil
	}
	changed := string(sec.Data[ref.Key]) != token
	sec = sec.DeepCopy()
	if sec.Annotations == nil {
		sec.Annotations = map[string]string{}
	}
	sec.Annotations[AnnotationRegistrationTokenChecked] = checked
	if sec.Data == nil {
		sec.Data = map[string][]byte{}
	}
	sec.Data[ref.Key] = []byte(token)
	_, err = secrets.Update(ctx, sec, metav1.UpdateOptions{FieldManager: v1alpha1.FieldManager})
	switch {
	case apierrors.IsConflict(err):
		return nil // another pass wrote it; the next pass checks again
	case err != nil:
		return reason.Errorf(v1alpha1.ReasonKubernetesError, "registration token: cannot update Secret %s/%s: %w", rg.Namespace, ref.Name, err)
	}
	if changed {
		g.log.Info("replaced the registration token: Gitea answered another one", "secret", ref.Name)
	}
	return nil
}

// recheckDue says whether the minted Secret's token should be asked of
// Gitea again: RegistrationTokenRecheck after the last check, or at once
// when the annotation is missing, unreadable or in the future (a clock
// that went back).
func recheckDue(sec *corev1.Secret, now time.Time) bool {
	at, err := time.Parse(time.RFC3339, sec.Annotations[AnnotationRegistrationTokenChecked])
	if err != nil || at.After(now) {
		return true
	}
	return now.Sub(at) >= RegistrationTokenRecheck
}

// ownedByGroup says whether refs name the group (by UID: a group deleted
// and made again under the same name does not own its predecessor's
// objects until they are collected).
func ownedByGroup(refs []metav1.OwnerReference, rg *v1alpha1.RunnerGroup) bool {
	for _, ref := range refs {
		if ref.UID == rg.UID && ref.Kind == v1alpha1.Kind {
			return true
		}
	}
	return false
}
