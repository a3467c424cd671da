package tenancy_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// TestRunnerConfigRights: a runner config that gives job containers
// privilege, the host network, host paths or another Docker daemon goes
// only where a privileged runner pod would: a namespace whose Pod Security
// level is privileged (or an unlabelled one the platform trusts).
func TestRunnerConfigRights(t *testing.T) {
	ns := func(labels map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: labels}}
	}
	needs := []string{"container.privileged: true (privileged job containers)"}
	tests := map[string]struct {
		ns    *corev1.Namespace
		needs []string
		trust bool
		want  string
	}{
		"nothing needed, restricted":              {ns: ns(map[string]string{tenancy.LabelEnforce: "restricted"})},
		"privileged level":                        {ns: ns(map[string]string{tenancy.LabelEnforce: "privileged"}), needs: needs},
		"baseline level":                          {ns: ns(map[string]string{tenancy.LabelEnforce: "baseline"}), needs: needs, want: `namespace team-a enforces Pod Security level "baseline", and the runner config gives job containers what only level privileged allows: container.privileged: true`},
		"restricted level":                        {ns: ns(map[string]string{tenancy.LabelEnforce: "restricted"}), needs: needs, want: `enforces Pod Security level "restricted"`},
		"an unparsable label":                     {ns: ns(map[string]string{tenancy.LabelEnforce: "lax"}), needs: needs, want: `enforces Pod Security level "restricted"`},
		"unlabelled":                              {ns: ns(nil), needs: needs, want: "namespace team-a has no pod-security.kubernetes.io/enforce label: container.privileged: true"},
		"unlabelled, trusted":                     {ns: ns(nil), needs: needs, trust: true},
		"labelled baseline, trusted is no matter": {ns: ns(map[string]string{tenancy.LabelEnforce: "baseline"}), needs: needs, trust: true, want: `level "baseline"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := tenancy.RunnerConfigRights(tc.ns, tc.needs, tenancy.Platform{TrustUnlabelled: tc.trust})
			if tc.want == "" {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got, tc.want)
		})
	}
}
