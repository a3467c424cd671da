package why

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/giteaurl"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// Issue 37: what a team adding a group checks before or after creating it,
// by the rules why and the pass share, with the fix for each gap.
func TestCheckGroupListsWhatIsMissingWithItsFix(t *testing.T) {
	// want maps each check that does not hold to its reason ("" for one
	// that has none) and to words its fix says; skipped lists the checks
	// left unchecked.
	type gap struct{ reason, fix string }
	tests := []struct {
		name    string
		group   string // a group of the world, or "" for a new one from a file
		change  func(t *testing.T, w *world, rg *v1alpha1.RunnerGroup)
		want    map[string]gap
		skipped []string
		asked   bool // whether a Gitea client was made with the group's token
	}{
		{name: "a served group with all it needs", group: "plain", asked: true},
		{name: "a new group from a file gets no last pass", asked: true},
		{name: "a namespace the listener does not serve",
			change: func(t *testing.T, w *world, _ *v1alpha1.RunnerGroup) { w.cfg.Namespaces = []string{"team-b"} },
			want:   map[string]gap{CheckServed: {"", "tenantNamespaces"}}, asked: true},
		{name: "a Gitea URL the listener does not allow",
			change: func(t *testing.T, w *world, _ *v1alpha1.RunnerGroup) {
				p, err := giteaurl.Parse([]string{"https://gitea.example.com"})
				require.NoError(t, err)
				w.cfg.AllowedGiteaURLs = p
			},
			want:    map[string]gap{CheckGiteaURL: {v1alpha1.ReasonGiteaURLNotAllowed, "allowedGiteaURLs"}},
			skipped: []string{CheckAPIToken, CheckRegistrationToken, CheckGitea}},
		{name: "a namespace not enabled gets the command that enables it",
			change: func(t *testing.T, w *world, _ *v1alpha1.RunnerGroup) { w.notEnabled[ns] = true },
			want: map[string]gap{CheckNamespace: {v1alpha1.ReasonNamespaceNotEnabled,
				"gitea-runner-scaler enable-namespace ci --tenant-cluster-role gitea-runner-operator-tenant --service-account " + scalerSA}},
			skipped: []string{CheckAPIToken, CheckRegistrationToken, CheckGitea}},
		{name: "a namespace whose grant leaves the owner out gets the grant to add",
			change: func(t *testing.T, w *world, _ *v1alpha1.RunnerGroup) {
				w.annotateNamespace(t, map[string]string{tenancy.AnnotationGrantedRepositories: "contoso"})
			},
			want:    map[string]gap{CheckNamespace: {v1alpha1.ReasonNotGranted, "--grant-repository 'acme'"}},
			skipped: []string{CheckAPIToken, CheckRegistrationToken, CheckGitea}},
		{name: "a token Secret not there yet",
			change: func(t *testing.T, w *world, rg *v1alpha1.RunnerGroup) {
				rg.Spec.AuthToken.SecretRef.Name = "acme-tokens"
			},
			want:    map[string]gap{CheckAPIToken: {v1alpha1.ReasonSecretNotFound, "kubectl -n ci create secret generic acme-tokens --from-literal=api=TOKEN"}},
			skipped: []string{CheckGitea}},
		{name: "a token Secret without the runners' label",
			change: func(t *testing.T, w *world, rg *v1alpha1.RunnerGroup) {
				w.secret(t, "unlabelled", nil, runnerTokenKeys, token)
				rg.Spec.AuthToken.SecretRef.Name = "unlabelled"
			},
			want:    map[string]gap{CheckAPIToken: {v1alpha1.ReasonSecretNotLabelled, "kubectl -n ci label secret unlabelled gitea.bpg.pw/runner-token=true"}},
			skipped: []string{CheckGitea}},
		{name: "a registration key declared as an API token only",
			change: func(t *testing.T, w *world, rg *v1alpha1.RunnerGroup) {
				w.secret(t, "undeclared", runnerTokenLabel, map[string]string{tenancy.AnnotationAPIKeys: "api"}, token)
				rg.Spec.RegistrationToken.SecretRef.Name = "undeclared"
			},
			want:  map[string]gap{CheckRegistrationToken: {v1alpha1.ReasonSecretKeyNotDeclared, tenancy.AnnotationRegistrationKeys}},
			asked: true},
		{name: "a token Gitea refuses",
			change: func(t *testing.T, w *world, rg *v1alpha1.RunnerGroup) {
				w.secret(t, "revoked", runnerTokenLabel, runnerTokenKeys, "revoked-token")
				rg.Spec.AuthToken.SecretRef.Name = "revoked"
			},
			want: map[string]gap{CheckGitea: {"", "401"}}, asked: true},
		{name: "an invalid spec is refused before any token is read",
			change:  func(t *testing.T, w *world, rg *v1alpha1.RunnerGroup) { rg.Spec.Org = "" },
			want:    map[string]gap{CheckSpec: {v1alpha1.ReasonInvalidSpec, "the field the message names"}},
			skipped: []string{CheckAPIToken, CheckRegistrationToken, CheckGitea}},
		{name: "a group no pass has served yet is not missing anything for it", group: "arm",
			skipped: []string{CheckLastPass}, asked: true},
		{name: "a group whose last pass failed says why", group: "big",
			want: map[string]gap{CheckLastPass: {v1alpha1.ReasonSecretNotFound, "troubleshooting"}}, asked: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			rg := group("new", 2, nil, v1alpha1.RunnerGroupStatus{}, w.srv.URL)
			rg.UID = "" // not created yet, as from a file
			if tt.group != "" {
				rg = w.groups[tt.group].DeepCopy()
			}
			if tt.change != nil {
				tt.change(t, w, rg)
			}
			rep, err := CheckGroup(context.Background(), w.deps, w.cfg, rg)
			require.NoError(t, err)

			got, skipped := map[string]gap{}, []string(nil)
			var checks []string
			for _, f := range rep.Findings {
				checks = append(checks, f.Check)
				switch {
				case f.Skipped:
					skipped = append(skipped, f.Check)
				case !f.OK:
					got[f.Check] = gap{f.Reason, f.Fix}
				}
			}
			require.Len(t, got, len(tt.want), "the checks that do not hold: %+v", rep.Findings)
			for check, g := range tt.want {
				require.Contains(t, got, check)
				assert.Equal(t, g.reason, got[check].reason, check)
				assert.Contains(t, got[check].fix+rep.message(check), g.fix, check)
			}
			assert.Equal(t, tt.skipped, skipped)
			assert.Equal(t, len(tt.want), rep.Missing())
			assert.Equal(t, rg.UID != "", checks[len(checks)-1] == CheckLastPass, "only a group that exists has a last pass: %v", checks)
			assert.Equal(t, tt.asked, len(w.tokens) > 0, "a Gitea client is made with the group's token only where a pass would send it")

			for _, format := range []string{"text", "json", "yaml"} {
				var out bytes.Buffer
				require.NoError(t, WriteGroup(&out, rep, format))
				assert.NotContains(t, out.String(), token, "the token never shows (%s)", format)
				assert.NotContains(t, out.String(), "revoked-token", "the token never shows (%s)", format)
			}
		})
	}
}

func TestWriteGroupMarksEachCheck(t *testing.T) {
	rep := &GroupReport{Group: "ci/acme", Findings: []Finding{
		{Check: CheckServed, OK: true},
		{Check: CheckNamespace, Reason: v1alpha1.ReasonNamespaceNotEnabled, Message: "namespace ci is not enabled\x1b[2J", Fix: "enable it"},
		{Check: CheckAPIToken, Skipped: true, Message: "not checked"},
	}}
	var out bytes.Buffer
	require.NoError(t, WriteGroup(&out, rep, "text"))
	assert.Equal(t, "group ci/acme\n"+
		"  ok       served\n"+
		"  MISSING  namespace: namespace ci is not enabled\\x1b[2J (NamespaceNotEnabled)\n"+
		"           fix: enable it\n"+
		"  skipped  API token: not checked\n"+
		"missing: 1\n", out.String())
}

// secret creates a token Secret in namespace ci.
func (w *world) secret(t *testing.T, name string, labels, annotations map[string]string, value string) {
	t.Helper()
	_, err := w.deps.Kube.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: annotations},
		Data:       map[string][]byte{"api": []byte(value), "reg": []byte("r")},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// message is the message of check's finding.
func (r *GroupReport) message(check string) string {
	for _, f := range r.Findings {
		if f.Check == check {
			return f.Message
		}
	}
	return ""
}

func TestCheckGroupSaysWhenTheLastPassWas(t *testing.T) {
	w := newWorld(t)
	rep, err := CheckGroup(context.Background(), w.deps, w.cfg, w.groups["plain"])
	require.NoError(t, err)
	last := rep.Findings[len(rep.Findings)-1]
	assert.Equal(t, Finding{Check: CheckLastPass, OK: true, Message: "Ready, 42s ago at generation 2"}, last)
}
