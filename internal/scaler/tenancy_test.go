package scaler

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/giteaurl"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

const otherNS = "team-b"

// groupIn reads a group of any namespace.
func (e *env) groupIn(namespace, name string) *v1alpha1.RunnerGroup {
	e.t.Helper()
	u, err := e.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(namespace).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(e.t, err)
	var rg v1alpha1.RunnerGroup
	require.NoError(e.t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &rg))
	return &rg
}

func ready(rg *v1alpha1.RunnerGroup) metav1.Condition {
	c := meta.FindStatusCondition(rg.Status.Conditions, v1alpha1.ConditionReady)
	if c == nil {
		return metav1.Condition{}
	}
	return *c
}

// requestsIn are the requests the pass sent into a namespace, as
// "verb resource".
func requestsIn(e *env, namespace string) []string {
	var out []string
	for _, a := range e.kube.Actions() {
		if a.GetNamespace() == namespace {
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
		}
	}
	return out
}

func TestAGroupInANamespaceNotEnabledGetsNamespaceNotEnabledAndNoOtherRequest(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5), newGroup("ci", 5, inNamespace(otherNS)), newGroup("web", 5, inNamespace(otherNS)))
	e.disabled[otherNS] = true
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(7, "ubuntu-latest")}}
	e.kube.ClearActions()

	sum := e.pass(func(_ *Deps, c *Config) {
		c.Tenancy = tenancy.Names{TenantClusterRole: "gro-gitea-runner-operator-gitea-runners-tenant", ServiceAccount: "gitea-runners:gro"}
	})

	assert.Equal(t, []string{otherNS + "/ci", otherNS + "/web"}, sum.Failed)
	for _, name := range []string{"ci", "web"} {
		c := ready(e.groupIn(otherNS, name))
		assert.Equal(t, metav1.ConditionFalse, c.Status)
		assert.Equal(t, v1alpha1.ReasonNamespaceNotEnabled, c.Reason)
		assert.Contains(t, c.Message, "kubectl create rolebinding gro-gitea-runner-operator-gitea-runners-tenant --namespace team-b --clusterrole gro-gitea-runner-operator-gitea-runners-tenant --serviceaccount gitea-runners:gro")
	}
	assert.Empty(t, requestsIn(e, otherNS), "no Secret, Job, ConfigMap or Event request in a namespace not enabled")
	for _, a := range e.kube.Actions() {
		if a.GetResource().Resource == "namespaces" {
			assert.NotEqual(t, otherNS, a.(k8stesting.GetAction).GetName(), "its Pod Security labels are not read either")
		}
	}
	assert.Equal(t, 1, e.reviews[otherNS], "one review for the namespace, however many groups it holds")
	assert.Equal(t, 1, e.reviews[ns])
	assert.Equal(t, v1alpha1.ReasonReconciled, ready(e.group("ci")).Reason, "the enabled namespace is served in the same pass")
	assert.Len(t, e.jobs(), 1)
	assert.Len(t, e.tokens, 1, "Gitea is asked for the enabled namespace's group only")
}

func TestANamespaceIsServedFromThePassAfterItIsEnabled(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5, inNamespace(otherNS)))
	e.disabled[otherNS] = true
	e.pass()
	require.Equal(t, v1alpha1.ReasonNamespaceNotEnabled, ready(e.groupIn(otherNS, "ci")).Reason)

	e.mu.Lock()
	delete(e.disabled, otherNS)
	e.mu.Unlock()
	for _, obj := range []runtime.Object{secret("api", secretToken), secret("reg", "reg-"+secretToken)} {
		if s, ok := obj.(*corev1.Secret); ok {
			s.Namespace = otherNS
		}
		require.NoError(t, e.kube.Tracker().Add(obj))
	}
	e.pass()
	assert.Equal(t, v1alpha1.ReasonReconciled, ready(e.groupIn(otherNS, "ci")).Reason)
	assert.Equal(t, 2, e.reviews[otherNS], "asked again each pass")
}

func TestAGroupWhoseGiteaURLIsNotAllowedSendsNoRequest(t *testing.T) {
	allowed, err := giteaurl.Parse([]string{"https://gitea.example.com/git"})
	require.NoError(t, err)
	tests := []struct {
		name   string
		url    string
		policy *giteaurl.Policy
		want   string
	}{
		{"a host not listed", "https://evil.example.org", allowed, "is under none of the allowed Gitea URLs"},
		{"a path beside the listed one", "https://gitea.example.com/git2", allowed, "is under none of the allowed Gitea URLs"},
		{"the metadata service with no list", "http://169.254.169.254", nil, "metadata address"},
		{"loopback with no list", "http://127.0.0.1:3000", nil, "loopback"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, newGroup("ci", 5, func(rg *v1alpha1.RunnerGroup) { rg.Spec.Gitea.URL = tt.url }))
			e.kube.ClearActions()
			e.pass(func(_ *Deps, c *Config) { c.AllowedGiteaURLs = tt.policy })
			c := ready(e.group("ci"))
			assert.Equal(t, v1alpha1.ReasonGiteaURLNotAllowed, c.Reason)
			assert.Contains(t, c.Message, tt.want)
			assert.Empty(t, e.tokens, "no Gitea client, so no request")
			assert.Zero(t, e.gitea.calls)
			for _, a := range e.kube.Actions() {
				assert.NotEqual(t, "secrets", a.GetResource().Resource, "the token is not even read")
			}
			assert.Empty(t, e.jobs())
		})
	}
}

func TestAListedGiteaURLIsServed(t *testing.T) {
	allowed, err := giteaurl.Parse([]string{"https://gitea.example.com"})
	require.NoError(t, err)
	e := newEnv(t, newGroup("ci", 5))
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(7, "ubuntu-latest")}}
	e.pass(func(_ *Deps, c *Config) { c.AllowedGiteaURLs = allowed })
	assert.Equal(t, v1alpha1.ReasonReconciled, ready(e.group("ci")).Reason)
	assert.Len(t, e.jobs(), 1)
}

func TestPodSecurityForbidsAPrivilegedRunnerWhereTheNamespaceWouldRefuseIt(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		trust  bool
		reason string
		jobs   int
	}{
		{"privileged", map[string]string{tenancy.LabelEnforce: "privileged"}, false, v1alpha1.ReasonReconciled, 1},
		{"baseline", map[string]string{tenancy.LabelEnforce: "baseline"}, false, v1alpha1.ReasonPodSecurityForbidsRunner, 0},
		{"restricted, though unlabelled namespaces are trusted", map[string]string{tenancy.LabelEnforce: "restricted"}, true, v1alpha1.ReasonPodSecurityForbidsRunner, 0},
		{"unlabelled", nil, false, v1alpha1.ReasonPodSecurityForbidsRunner, 0},
		{"unlabelled, trusted", nil, true, v1alpha1.ReasonReconciled, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, newGroup("ci", 5))
			e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(7, "ubuntu-latest")}}
			e.labelNamespace(tt.labels)

			e.pass(func(_ *Deps, c *Config) { c.PodSecurity.TrustUnlabelled = tt.trust })

			c := ready(e.group("ci"))
			assert.Equal(t, tt.reason, c.Reason, c.Message)
			assert.Len(t, e.jobs(), tt.jobs)
			if tt.reason == v1alpha1.ReasonPodSecurityForbidsRunner {
				assert.Contains(t, c.Message, "pod-security.kubernetes.io/enforce=privileged", "says what to change")
				assert.Zero(t, e.gitea.calls)
			}
		})
	}
}

func TestATokenSecretWithoutTheLabelIsNotUsed(t *testing.T) {
	for _, which := range []string{"api", "reg"} {
		t.Run(which, func(t *testing.T) {
			e := newEnv(t, newGroup("ci", 5))
			sec, err := e.kube.CoreV1().Secrets(ns).Get(context.Background(), which, metav1.GetOptions{})
			require.NoError(t, err)
			sec.Labels = nil
			_, err = e.kube.CoreV1().Secrets(ns).Update(context.Background(), sec, metav1.UpdateOptions{})
			require.NoError(t, err)

			e.pass()

			c := ready(e.group("ci"))
			assert.Equal(t, v1alpha1.ReasonSecretNotLabelled, c.Reason)
			assert.Contains(t, c.Message, "kubectl label secret --namespace runners "+which+" gitea.bpg.pw/runner-token=true")
			assert.Zero(t, e.gitea.calls, "no request to Gitea")
			if which == "api" {
				assert.Empty(t, e.tokens, "the unlabelled token goes nowhere")
			}
			assert.Empty(t, e.jobs())
		})
	}
}

// TestTokenKeysAreUsedOnlyAsTheSecretOwnerDeclared is issue 24 item 1: a
// writer who cannot read Secrets points the group at a key of a labelled
// Secret; the scaler uses the key only as the Secret's annotations
// declare it. An API key never reaches a runner pod, a registration key is
// never sent to Gitea, and only a key declared for minting mints.
func TestTokenKeysAreUsedOnlyAsTheSecretOwnerDeclared(t *testing.T) {
	tests := map[string]struct {
		group  func(*v1alpha1.RunnerGroup)
		secret func(*corev1.Secret) // changes the "api" Secret
		reason string
		want   string
	}{
		"declared as the fixture declares": {group: func(*v1alpha1.RunnerGroup) {}, reason: v1alpha1.ReasonReconciled},
		"the API key as the registration token": {
			group: func(rg *v1alpha1.RunnerGroup) {
				rg.Spec.RegistrationToken.SecretRef = v1alpha1.SecretRef{Name: "api", Key: "token"}
			},
			reason: v1alpha1.ReasonInvalidSpec, want: "name the same key of the same Secret",
		},
		"an API key of a Secret holding both, as the registration token": {
			group: func(rg *v1alpha1.RunnerGroup) {
				rg.Spec.RegistrationToken.SecretRef = v1alpha1.SecretRef{Name: "api", Key: "admin"}
			},
			secret: func(s *corev1.Secret) {
				s.Data["admin"] = []byte("admin-" + secretToken)
				s.Annotations[tenancy.AnnotationAPIKeys] = "token,admin"
			},
			reason: v1alpha1.ReasonSecretKeyNotDeclared, want: `spec.registrationToken: key "admin" of Secret runners/api is not listed in its annotation gitea.bpg.pw/registration-token-keys`,
		},
		"the registration key as the API token": {
			group: func(rg *v1alpha1.RunnerGroup) {
				rg.Spec.AuthToken.SecretRef = v1alpha1.SecretRef{Name: "reg", Key: "token"}
			},
			reason: v1alpha1.ReasonInvalidSpec, want: "name the same key of the same Secret",
		},
		"a key of the API Secret that is not declared at all": {
			group:  func(rg *v1alpha1.RunnerGroup) { rg.Spec.AuthToken.SecretRef.Key = "other" },
			secret: func(s *corev1.Secret) { s.Data["other"] = []byte("other-" + secretToken) },
			reason: v1alpha1.ReasonSecretKeyNotDeclared, want: "gitea.bpg.pw/api-token-keys",
		},
		"minting with an API key the owner did not allow to mint": {
			group:  minting,
			secret: func(s *corev1.Secret) { delete(s.Annotations, tenancy.AnnotationMintKeys) },
			reason: v1alpha1.ReasonSecretKeyNotDeclared, want: "gitea.bpg.pw/mint-token-keys",
		},
		"minting with a declared minting key": {group: minting, reason: v1alpha1.ReasonReconciled},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, newGroup("ci", 5, tc.group, func(rg *v1alpha1.RunnerGroup) { rg.Spec.MinIdleRunners = 1 }))
			e.gitea.regToken = mintedToken
			if tc.secret != nil {
				sec, err := e.kube.CoreV1().Secrets(ns).Get(context.Background(), "api", metav1.GetOptions{})
				require.NoError(t, err)
				tc.secret(sec)
				_, err = e.kube.CoreV1().Secrets(ns).Update(context.Background(), sec, metav1.UpdateOptions{})
				require.NoError(t, err)
			}

			e.pass()

			c := ready(e.group("ci"))
			assert.Equal(t, tc.reason, c.Reason, c.Message)
			assert.Contains(t, c.Message, tc.want)
			if tc.reason == v1alpha1.ReasonReconciled {
				assert.Len(t, e.jobs(), 1, "the warm runner")
				return
			}
			assert.Empty(t, e.jobs(), "no runner pod gets the key")
			assert.Zero(t, e.gitea.mints, "nothing minted")
			assert.NotContains(t, c.Message, secretToken)
		})
	}
}

// TestPodSecurityJudgesUserNamespacedRunnersAsThePlatformSays is issue 39
// through a pass: a group whose runner pod runs in a user namespace
// (hostUsers: false) with an unmasked /proc, in a namespace enforcing
// baseline, gets a Job only when the platform says the API server relaxes
// Pod Security for such pods (its feature gate
// UserNamespacesPodSecurityStandards).
func TestPodSecurityJudgesUserNamespacedRunnersAsThePlatformSays(t *testing.T) {
	userNamespaced := func(rg *v1alpha1.RunnerGroup) {
		rg.Spec.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			HostUsers: ptr.To(false),
			Containers: []corev1.Container{{Name: "runner", SecurityContext: &corev1.SecurityContext{
				Privileged: ptr.To(false), ProcMount: ptr.To(corev1.UnmaskedProcMount),
			}}},
		}}
	}
	tests := []struct {
		name   string
		relax  bool
		server *version.Info // the fake's /version; nil for none
		reason string
		jobs   int
	}{
		{"the API server's gate is off", false, nil, v1alpha1.ReasonPodSecurityForbidsRunner, 0},
		{"the API server's gate is on", true, nil, v1alpha1.ReasonReconciled, 1},
		{"an API server of 1.34 without the gate", false, &version.Info{Major: "1", Minor: "34"}, v1alpha1.ReasonPodSecurityForbidsRunner, 0},
		{"an API server of 1.35, which relaxes with no gate", false, &version.Info{Major: "1", Minor: "35"}, v1alpha1.ReasonReconciled, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, newGroup("ci", 5, userNamespaced))
			if tt.server != nil {
				e.kube.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = tt.server
			}
			e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(7, "ubuntu-latest")}}
			e.labelNamespace(map[string]string{tenancy.LabelEnforce: "baseline"})

			e.pass(func(_ *Deps, c *Config) { c.PodSecurity.UserNamespacesPodSecurityStandards = tt.relax })

			c := ready(e.group("ci"))
			assert.Equal(t, tt.reason, c.Reason, c.Message)
			if assert.Len(t, e.jobs(), tt.jobs) && tt.jobs == 1 {
				spec := e.jobs()[0].Spec.Template.Spec
				assert.Equal(t, ptr.To(false), spec.HostUsers, "the Job's pod is the one judged")
			}
			if tt.reason == v1alpha1.ReasonPodSecurityForbidsRunner {
				assert.Contains(t, c.Message, "procMount")
			}
		})
	}
}
