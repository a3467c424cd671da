package tenancy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTokenKeyUse is issue 24 item 1: the label says a Secret is meant for
// the scaler; each key is used only as its owner declared it, so that an
// API token never reaches a runner pod and only declared keys may mint.
func TestTokenKeyUse(t *testing.T) {
	secret := func(labels, annotations map[string]string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tokens", Namespace: "team-a", Labels: labels, Annotations: annotations}}
	}
	labelled := map[string]string{SecretLabel: "true"}
	both := secret(labelled, map[string]string{
		AnnotationRegistrationKeys: "registration",
		AnnotationAPIKeys:          "api, api-admin",
		AnnotationMintKeys:         "api-admin",
	})
	tests := map[string]struct {
		sec  *corev1.Secret
		key  string
		use  TokenUse
		want string // phrase of the refusal; "" when allowed
	}{
		"a registration key as registration token": {sec: both, key: "registration", use: UseRegistration},
		"an API key as API token":                  {sec: both, key: "api", use: UseAPI},
		"a second API key, listed after a comma":   {sec: both, key: "api-admin", use: UseAPI},
		"a minting key mints":                      {sec: both, key: "api-admin", use: UseMint},
		"an API key into a runner pod": {
			sec: both, key: "api", use: UseRegistration,
			want: `key "api" of Secret team-a/tokens is not listed in its annotation gitea.bpg.pw/registration-token-keys`,
		},
		"a registration key sent to Gitea": {
			sec: both, key: "registration", use: UseAPI,
			want: `key "registration" of Secret team-a/tokens is not listed in its annotation gitea.bpg.pw/api-token-keys`,
		},
		"an API key that may not mint": {
			sec: both, key: "api", use: UseMint,
			want: `key "api" of Secret team-a/tokens is not listed in its annotation gitea.bpg.pw/mint-token-keys`,
		},
		"a minting key that is not an API key": {
			sec: secret(labelled, map[string]string{AnnotationMintKeys: "api"}), key: "api", use: UseMint,
			want: "gitea.bpg.pw/api-token-keys",
		},
		"a key declared both ways is neither": {
			sec: secret(labelled, map[string]string{AnnotationRegistrationKeys: "tok", AnnotationAPIKeys: "tok"}), key: "tok", use: UseRegistration,
			want: "is listed both as a registration token (gitea.bpg.pw/registration-token-keys) and as an API token",
		},
		"a key declared both ways is not sent to Gitea either": {
			sec: secret(labelled, map[string]string{AnnotationRegistrationKeys: "tok", AnnotationAPIKeys: "tok"}), key: "tok", use: UseAPI,
			want: "is listed both as a registration token (gitea.bpg.pw/registration-token-keys) and as an API token",
		},
		"the label alone, as before this rule": {
			sec: secret(labelled, nil), key: "api", use: UseAPI,
			want: "kubectl annotate secret --namespace team-a tokens gitea.bpg.pw/api-token-keys=api",
		},
		"no label": {
			sec: secret(nil, map[string]string{AnnotationAPIKeys: "api"}), key: "api", use: UseAPI,
			want: "lacks the label gitea.bpg.pw/runner-token=true",
		},
		"another label value": {
			sec: secret(map[string]string{SecretLabel: "yes"}, map[string]string{AnnotationAPIKeys: "api"}), key: "api", use: UseAPI,
			want: "lacks the label gitea.bpg.pw/runner-token=true",
		},
		"the command keeps the keys listed already": {
			sec: both, key: "api", use: UseMint,
			want: "kubectl annotate secret --namespace team-a tokens --overwrite gitea.bpg.pw/mint-token-keys=api-admin,api",
		},
		"a key that merely contains a listed one": {
			sec: secret(labelled, map[string]string{AnnotationAPIKeys: "api-admin"}), key: "api", use: UseAPI,
			want: "not listed",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := TokenKeyRefusal(tc.sec, tc.key, tc.use)
			if tc.want == "" {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got, tc.want)
		})
	}
}
