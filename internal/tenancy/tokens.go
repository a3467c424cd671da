package tenancy

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// SecretLabel marks a Secret the scaler may read for a RunnerGroup of its
// namespace. Without it, a RunnerGroup's writer who cannot read Secrets
// could name any Secret of the namespace and have the scaler send it to
// Gitea as a token or hand it to a runner pod. Setting the label needs the
// right to change that Secret: its owner says it is meant for runners.
const SecretLabel = "gitea.bpg.pw/runner-token"

// The annotations on a labelled Secret that say what each key holds, as
// comma-separated key names. The label says "meant for the scaler"; these
// say for what, key by key, because the two uses give different people
// the token:
//
//   - a registration token reaches the runner pod (a secretKeyRef in the
//     runner Job), whose command the group's writer controls: whoever may
//     write RunnerGroups in the namespace can read it;
//   - an API token is only ever sent to Gitea by the scaler; it acts with
//     its owner's rights (an org owner's, an admin's), which the group's
//     writer must not get;
//   - minting with an API token puts a registration token of the group's
//     scope, which the group's writer chooses among those the token
//     reaches (every scope, for an admin token), into that same pod.
//
// Without per-key intent, one labelled Secret holding both tokens let a
// writer point spec.registrationToken at the API key and read the API
// token from the runner pod.
const (
	AnnotationRegistrationKeys = "gitea.bpg.pw/registration-token-keys"
	AnnotationAPIKeys          = "gitea.bpg.pw/api-token-keys"
	AnnotationMintKeys         = "gitea.bpg.pw/mint-token-keys"
)

// TokenUse is what the scaler does with a key of a token Secret.
type TokenUse int

const (
	// UseRegistration: the key is spec.registrationToken and reaches the
	// runner pod.
	UseRegistration TokenUse = iota
	// UseAPI: the key is spec.authToken and is sent to Gitea.
	UseAPI
	// UseMint: the key is spec.authToken of a group without
	// spec.registrationToken, and the scaler mints the scope's
	// registration token with it.
	UseMint
)

// SecretAllowed reports whether the scaler may read sec for a group.
func SecretAllowed(sec *corev1.Secret) bool {
	return sec.Labels[SecretLabel] == "true"
}

// TokenKeyRefusal says why key of sec must not be used as use, or "" when
// it may. The message names the Secret, the key and the command that
// declares it, never a value.
func TokenKeyRefusal(sec *corev1.Secret, key string, use TokenUse) string {
	name := sec.Namespace + "/" + sec.Name
	if !SecretAllowed(sec) {
		return fmt.Sprintf("Secret %s lacks the label %s=true that lets the scaler use it; whoever may change the Secret adds it: kubectl label secret --namespace %s %s %s=true",
			name, SecretLabel, sec.Namespace, sec.Name, SecretLabel)
	}
	registration, api := listed(sec, AnnotationRegistrationKeys, key), listed(sec, AnnotationAPIKeys, key)
	if registration && api {
		return fmt.Sprintf("key %q of Secret %s is listed both as a registration token (%s) and as an API token (%s); a key is one or the other, so the scaler uses it as neither: whoever may change the Secret lists it once",
			key, name, AnnotationRegistrationKeys, AnnotationAPIKeys)
	}
	var missing, why string
	switch {
	case use == UseRegistration && !registration:
		missing, why = AnnotationRegistrationKeys, "so the scaler does not put it in a runner pod, which whoever writes RunnerGroups controls"
	case (use == UseAPI || use == UseMint) && !api:
		missing, why = AnnotationAPIKeys, "so the scaler does not send it to Gitea as an API token"
	case use == UseMint && !listed(sec, AnnotationMintKeys, key):
		missing, why = AnnotationMintKeys, "so the scaler does not mint registration tokens with it: a minted token reaches a runner pod, and the group's writer picks its scope among all those the API token reaches; set spec.registrationToken instead, or have the Secret's owner allow minting"
	default:
		return ""
	}
	overwrite := ""
	if sec.Annotations[missing] != "" {
		overwrite = "--overwrite "
	}
	return fmt.Sprintf("key %q of Secret %s is not listed in its annotation %s, %s; whoever may change the Secret declares it: kubectl annotate secret --namespace %s %s %s%s=%s",
		key, name, missing, why, sec.Namespace, sec.Name, overwrite, missing, appended(sec.Annotations[missing], key))
}

// listed reports whether annotation ann of sec names key.
func listed(sec *corev1.Secret, ann, key string) bool {
	return slices.Contains(keyList(sec.Annotations[ann]), key)
}

func keyList(v string) []string {
	var out []string
	for k := range strings.SplitSeq(v, ",") {
		if k = strings.TrimSpace(k); k != "" {
			out = append(out, k)
		}
	}
	return out
}

// appended is the annotation's value with key added, for the command a
// refusal suggests: the keys listed already stay listed.
func appended(v, key string) string {
	return strings.Join(append(keyList(v), key), ",")
}
