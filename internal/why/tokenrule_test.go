package why

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/giteaurl"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnergroups"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// annotateNamespace sets annotations on namespace ci.
func (w *world) annotateNamespace(t *testing.T, ann map[string]string) {
	t.Helper()
	ctx := context.Background()
	n, err := w.deps.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.NoError(t, err)
	n.Annotations = ann
	_, err = w.deps.Kube.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// Issue 36: why sends a group's API token only where a pass would. A
// group the pass refuses before it reads the token (a Gitea URL the
// allowed list does not admit, a namespace that is not enabled or whose
// grant does not cover the group) is refused by why through the same
// rule (tokenrule.Refusal): no Gitea client is made with its token, the
// report names the rule and where it is set, and why still answers from
// what it sees without Gitea (the job's runner Job, its pod).
func TestExplainSendsNoTokenWhereAPassWouldNot(t *testing.T) {
	tests := []struct {
		name   string
		arg    string // "" is job 107's URL, whose runner Job cannot pull its image
		change func(t *testing.T, w *world)
		reason string
		says   []string
	}{
		{name: "a Gitea URL the allowed list does not admit",
			change: func(t *testing.T, w *world) {
				p, err := giteaurl.Parse([]string{"https://gitea.example.com"})
				require.NoError(t, err)
				w.cfg.AllowedGiteaURLs = p
			},
			reason: v1alpha1.ReasonGiteaURLNotAllowed,
			says:   []string{"under none of the allowed Gitea URLs", "allowedGiteaURLs", "--allowed-gitea-urls"}},
		{name: "an empty allowed list admits no loopback address", arg: "101",
			change: func(t *testing.T, w *world) { w.cfg.AllowedGiteaURLs = nil },
			reason: v1alpha1.ReasonGiteaURLNotAllowed,
			says:   []string{"loopback", "--allowed-gitea-urls"}},
		{name: "the namespace's granted Gitea URLs leave the group's out",
			change: func(t *testing.T, w *world) {
				w.annotateNamespace(t, map[string]string{tenancy.AnnotationGrantedGiteaURLs: "https://gitea.example.com"})
			},
			reason: v1alpha1.ReasonNotGranted,
			says:   []string{"is not granted to namespace ci", tenancy.AnnotationGrantedGiteaURLs}},
		{name: "the namespace's granted repositories leave the group's owner out", arg: "101",
			change: func(t *testing.T, w *world) {
				w.annotateNamespace(t, map[string]string{tenancy.AnnotationGrantedRepositories: "other"})
			},
			reason: v1alpha1.ReasonNotGranted,
			says:   []string{"owner acme is not granted to namespace ci", tenancy.AnnotationGrantedRepositories}},
		{name: "a namespace that is not enabled",
			change: func(t *testing.T, w *world) { w.notEnabled[ns] = true },
			reason: v1alpha1.ReasonNamespaceNotEnabled,
			says:   []string{"namespace ci is not enabled for this scaler", "kubectl create rolebinding gitea-runner-operator-tenant --namespace ci"}},
		{name: "without the scaler's ServiceAccount why cannot tell that the namespace is enabled",
			change: func(t *testing.T, w *world) { w.cfg.Tenancy.ServiceAccount = "" },
			reason: v1alpha1.ReasonKubernetesError,
			says:   []string{"cannot tell whether namespace ci is enabled", "--service-account", "SCALER_SERVICE_ACCOUNT"}},
		{name: "a namespace whose grant cannot be read",
			change: func(t *testing.T, w *world) {
				require.NoError(t, w.deps.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}))
			},
			reason: v1alpha1.ReasonKubernetesError,
			says:   []string{"cannot read namespace ci"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			tt.change(t, w)
			arg := tt.arg
			if arg == "" {
				arg = w.srv.URL + "/acme/web/actions/runs/3/jobs/107"
			}
			ref, err := ParseRef(arg)
			require.NoError(t, err)
			w.srv.ResetRequests()
			rep, err := Explain(context.Background(), w.deps, w.cfg, ref)
			require.NoError(t, err, "why answers from what it sees without the token")

			assert.Empty(t, w.tokens, "no Gitea client is made with a token a pass would not send")
			assert.Empty(t, w.srv.Requests(), "Gitea is not asked")
			assert.Equal(t, VerdictNotAsked, rep.Verdict, "%q", rep.Explanation)
			assert.Equal(t, StatusNotAsked, rep.Job.Status)
			require.Len(t, rep.NotAsked, 4, "every group of ci contains acme's repositories")
			for _, r := range rep.NotAsked {
				assert.Equal(t, tt.reason, r.Reason, r.Group)
			}
			var text, js bytes.Buffer
			require.NoError(t, Write(&text, rep, "text"))
			require.NoError(t, Write(&js, rep, "json"))
			assert.Contains(t, text.String(), "did not ask Gitea with the API token of ci/plain")
			assert.Contains(t, text.String(), "a pass refuses that group too ("+tt.reason+")")
			for _, s := range tt.says {
				assert.Contains(t, text.String(), s)
				assert.Contains(t, js.String(), s)
			}
			assert.NotContains(t, text.String()+js.String(), token, "the API token must never show")
			if tt.arg == "" {
				require.NotNil(t, rep.Runner, "the runner Job is found without Gitea: %q", rep.Explanation)
				assert.Equal(t, "ImagePullBackOff", rep.Runner.Reason)
				assert.Contains(t, text.String(), "Runner Job ci/plain-pull1 was started for it, but its pod has not started: ImagePullBackOff")
			}
		})
	}
}

// One namespace's refusal does not keep why from asking with the groups a
// pass serves; the refused group's token goes nowhere and a note says why.
func TestExplainAsksWithTheGroupsAPassServesAndNotesTheOthers(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	const other, otherToken = "a-team", "a-team-s3cr3t-t0ken"
	w.srv.AddToken(otherToken, "bot", false)
	_, err := w.deps.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other,
		Annotations: map[string]string{tenancy.AnnotationGrantedRepositories: "a-team"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = w.deps.Kube.CoreV1().Secrets(other).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "tokens", Labels: runnerTokenLabel, Annotations: runnerTokenKeys},
		Data: map[string][]byte{"api": []byte(otherToken), "reg": []byte("r")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	rg := group("aaa", 3, nil, v1alpha1.RunnerGroupStatus{}, w.srv.URL)
	rg.Namespace = other
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rg)
	require.NoError(t, err)
	_, err = w.deps.Groups.(runnergroups.Client).Dynamic.Resource(v1alpha1.GroupVersionResource).Namespace(other).Create(ctx, &unstructured.Unstructured{Object: m}, metav1.CreateOptions{})
	require.NoError(t, err)
	w.cfg.Namespaces = []string{other, ns}

	for _, arg := range []string{"101", w.srv.URL + "/acme/app/actions/runs/1/jobs/101"} {
		t.Run(arg, func(t *testing.T) {
			w.tokens = nil
			ref, err := ParseRef(arg)
			require.NoError(t, err)
			rep, err := Explain(ctx, w.deps, w.cfg, ref)
			require.NoError(t, err)
			assert.Equal(t, VerdictWaitingForPass, rep.Verdict, "%q", rep.Explanation)
			assert.Equal(t, "ci/plain", rep.Assigned)
			assert.NotContains(t, w.tokens, otherToken, "a-team is not granted acme")
			assert.NotEmpty(t, w.tokens)
			require.Len(t, rep.NotAsked, 1)
			assert.Equal(t, other+"/aaa", rep.NotAsked[0].Group)
			assert.Equal(t, v1alpha1.ReasonNotGranted, rep.NotAsked[0].Reason)
			var text bytes.Buffer
			require.NoError(t, Write(&text, rep, "text"))
			assert.Contains(t, text.String(), fmt.Sprintf("did not ask Gitea with the API token of %s/aaa: a pass refuses that group too (NotGranted)", other))
			assert.Contains(t, text.String(), tenancy.AnnotationGrantedRepositories)
			assert.NotContains(t, text.String(), otherToken)
		})
	}
}
