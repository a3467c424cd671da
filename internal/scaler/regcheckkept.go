package scaler

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// The registration token checks' verdicts, kept where the next pass finds
// them (Config.KeptRegistrationChecks): a CronJob pass remembers nothing,
// and without them every pass would ask Gitea once or twice per distinct
// token scope. The ConfigMap is in the release namespace, where no tenant
// writes: a tenant knows its own tokens, so it could compute their key and
// write "match" for a token of another scope. A ConfigMap of that name
// anywhere else is never read.
//
// A loop keeps its verdicts in memory and writes them here too, so a
// restarted loop (a rollout, an eviction) starts warm instead of asking
// Gitea for every scope at once; it reads the ConfigMap on its first pass
// only. Writing costs one update per pass that reached a new verdict: at
// most one per token scope per RegistrationTokenRecheck.

// keptChecksBudget is how many bytes of verdicts the ConfigMap holds at
// most (a ConfigMap holds 1 MiB, its metadata included), about 4,000
// verdicts; beyond it the oldest go, and cost a request when next needed.
const keptChecksBudget = 900 << 10

// keptCheck is a verdict as the ConfigMap keeps it. The key is a digest
// (regCheckKey), never a token; refused is Gitea's reason, which the
// group's condition shows anyway.
type keptCheck struct {
	At      time.Time   `json:"at"`
	Match   bool        `json:"match,omitempty"`
	Scope   scope.Place `json:"scope,omitzero"`
	Refused string      `json:"refused,omitempty"`
}

// maxRefusedRunes bounds a kept refusal's reason.
const maxRefusedRunes = 256

// regCheckKey is a check's key: a digest of the Gitea URL, the target and
// both tokens, so a changed Secret is another key and checked at once.
// Both tokens are random strings Gitea made, so the digest reveals
// neither (see security.md).
func regCheckKey(url string, target scope.Place, apiToken, regToken string) [32]byte {
	return sha256.Sum256([]byte(url + "\x00" + target.String() + "\x00" + apiToken + "\x00" + regToken))
}

// loadKeptChecks adds the kept verdicts to r, once per regChecks: a single
// pass's checks are new each pass, a loop's are loaded on its first. A
// ConfigMap that cannot be read costs only requests to Gitea.
func (s *Scaler) loadKeptChecks(ctx context.Context, r *regChecks) {
	where := s.cfg.KeptRegistrationChecks
	if where == nil || !r.startLoading() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.GroupTimeout)
	defer cancel()
	cm, err := s.kube.CoreV1().ConfigMaps(where.Namespace).Get(ctx, where.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return
	case err != nil:
		s.log.Warn("cannot read the kept registration token checks; this pass asks Gitea again", "configMap", where.String(), "error", err)
		return
	}
	r.merge(decodeKeptChecks(cm.Data, s.now()))
}

// saveKeptChecks writes r's verdicts to the ConfigMap when this pass
// reached a new one, merged with what another listener wrote meanwhile.
func (s *Scaler) saveKeptChecks(ctx context.Context, r *regChecks) {
	where := s.cfg.KeptRegistrationChecks
	if where == nil || s.cfg.DryRun || !r.changed() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.GroupTimeout)
	defer cancel()
	cms := s.kube.CoreV1().ConfigMaps(where.Namespace)
	now := s.now()
	lostRace := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }
	err := retry.OnError(retry.DefaultRetry, lostRace, func() error {
		cm, err := cms.Get(ctx, where.Name, metav1.GetOptions{})
		exists := err == nil
		switch {
		case apierrors.IsNotFound(err):
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: where.Name, Namespace: where.Namespace}}
		case err != nil:
			return err
		}
		all := decodeKeptChecks(cm.Data, now)
		for k, v := range r.snapshot() {
			if old, ok := all[k]; !ok || v.at.After(old.at) {
				all[k] = v
			}
		}
		data, err := encodeKeptChecks(all, now)
		if err != nil {
			return err
		}
		cm = cm.DeepCopy()
		cm.Data = data
		if cm.Labels == nil {
			cm.Labels = map[string]string{}
		}
		cm.Labels[v1alpha1.LabelManagedBy] = v1alpha1.ManagedBy
		if exists {
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: v1alpha1.FieldManager})
		} else {
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: v1alpha1.FieldManager})
		}
		return err
	})
	if err != nil {
		s.log.Warn("cannot keep the registration token checks; the next pass asks Gitea again", "configMap", where.String(), "error", err)
		return
	}
	r.saved()
}

// encodeKeptChecks is the ConfigMap's data for the verdicts: transient
// failures and verdicts expired at now left out, then the oldest until
// the rest fit keptChecksBudget.
func encodeKeptChecks(vs map[[32]byte]regVerdict, now time.Time) (map[string]string, error) {
	type entry struct {
		key, raw string
		at       time.Time
	}
	var entries []entry
	for k, v := range vs {
		if v.transient != nil || !stillGood(v.at, now) {
			continue
		}
		kc := keptCheck{At: v.at.UTC(), Match: v.match, Scope: v.scope}
		if v.refused != nil {
			kc.Refused = cutRunes(v.refused.Error(), maxRefusedRunes)
		}
		raw, err := json.Marshal(kc)
		if err != nil {
			return nil, fmt.Errorf("cannot encode a registration token check: %w", err)
		}
		entries = append(entries, entry{key: base64.RawURLEncoding.EncodeToString(k[:]), raw: string(raw), at: v.at})
	}
	slices.SortFunc(entries, func(a, b entry) int { return cmp.Or(b.at.Compare(a.at), cmp.Compare(a.key, b.key)) })
	out, used := map[string]string{}, 0
	for _, e := range entries {
		if used += len(e.key) + len(e.raw); used > keptChecksBudget {
			break
		}
		out[e.key] = e.raw
	}
	return out, nil
}

// decodeKeptChecks reads the ConfigMap's data; an entry that cannot be
// read, or has expired at now, is left out: it costs a request.
func decodeKeptChecks(data map[string]string, now time.Time) map[[32]byte]regVerdict {
	out := map[[32]byte]regVerdict{}
	for _, key := range slices.Sorted(maps.Keys(data)) {
		var k [32]byte
		raw, err := base64.RawURLEncoding.DecodeString(key)
		if err != nil || len(raw) != len(k) {
			continue
		}
		copy(k[:], raw)
		var kc keptCheck
		if json.Unmarshal([]byte(data[key]), &kc) != nil || !stillGood(kc.At, now) {
			continue
		}
		v := regVerdict{at: kc.At, match: kc.Match, scope: kc.Scope}
		if kc.Refused != "" {
			v.refused = errors.New(kc.Refused)
		}
		out[k] = v
	}
	return out
}

// stillGood says whether a verdict reached at is still good at now.
func stillGood(at, now time.Time) bool {
	return now.Sub(at) < RegistrationTokenRecheck && !at.After(now)
}
