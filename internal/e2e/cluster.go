//go:build e2e

// Cluster objects the tests make and read: namespaces, token Secrets,
// runner Jobs and their pods.

package e2e

import (
	"context"
	"maps"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// GiteaURL is the bed's Gitea, which releases and passes allow.
var GiteaURL string

// Namespace creates a namespace named prefix-<random>, with the labels on
// top of the e2e one and a Pod Security enforce label of privileged (the
// runner pods are; the labels may say otherwise), and deletes it (and so everything in it) when the test
// ends. It creates the default ServiceAccount at once: pods need it, and the
// controller that makes it may be slower than the scaler or the test.
func (b *Testbed) Namespace(ctx context.Context, t *testing.T, prefix string, labels map[string]string) string {
	t.Helper()
	all := map[string]string{"gitea.bpg.pw/e2e": "true", tenancy.LabelEnforce: tenancy.LevelPrivileged}
	maps.Copy(all, labels)
	ns, err := b.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: all},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		if Keep() {
			t.Logf("E2E_KEEP: leaving namespace %s", ns.Name)
			return
		}
		ctx, cancel := CleanupContext()
		defer cancel()
		if err := b.Kube.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", ns.Name, err)
		}
	})
	_, err = b.Kube.CoreV1().ServiceAccounts(ns.Name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	return ns.Name
}

// TokenSecret creates the Secret a RunnerGroup names: key "registration"
// holds the runner registration token, key "api" the API token, each
// declared as such, and the API token may mint (tenancy.TokenKeyRefusal).
func (b *Testbed) TokenSecret(ctx context.Context, t *testing.T, ns, name, registration, api string) {
	t.Helper()
	Secrets.Add(registration)
	Secrets.Add(api)
	_, err := b.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{tenancy.SecretLabel: "true"}, Annotations: map[string]string{
			tenancy.AnnotationRegistrationKeys: "registration", tenancy.AnnotationAPIKeys: "api", tenancy.AnnotationMintKeys: "api",
		}},
		StringData: map[string]string{"registration": registration, "api": api},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// RunnerJobs lists a group's runner Jobs by the group label.
func (b *Testbed) RunnerJobs(ctx context.Context, ns, group string) ([]batchv1.Job, error) {
	list, err := b.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelGroup + "=" + group})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// JobPods lists the pods of a Job by the label the Job controller sets.
func (b *Testbed) JobPods(ctx context.Context, ns, job string) ([]corev1.Pod, error) {
	list, err := b.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// ByGiteaJob groups runner Jobs by their gitea-job-id label.
func ByGiteaJob(jobs []batchv1.Job) map[int64][]batchv1.Job {
	out := map[int64][]batchv1.Job{}
	for i, j := range jobs {
		id := runnerjob.GiteaJobID(&jobs[i])
		out[id] = append(out[id], j)
	}
	return out
}

func JobCondition(j *batchv1.Job, typ batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// JobActive is an active runner as the README's status table counts it: a
// runner Job with no Complete or Failed condition yet.
func JobActive(j *batchv1.Job) bool {
	return !JobCondition(j, batchv1.JobComplete) && !JobCondition(j, batchv1.JobFailed)
}

func JobState(j *batchv1.Job) string {
	switch {
	case JobCondition(j, batchv1.JobComplete):
		return "Complete"
	case JobCondition(j, batchv1.JobFailed):
		return "Failed"
	default:
		return "Active"
	}
}

func ActiveCount(jobs []batchv1.Job) int {
	n := 0
	for i := range jobs {
		if JobActive(&jobs[i]) {
			n++
		}
	}
	return n
}

func JobNames(jobs []batchv1.Job) []string {
	out := make([]string, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, j.Name)
	}
	sort.Strings(out)
	return out
}

func EnvOf(c corev1.Container, name string) (corev1.EnvVar, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e, true
		}
	}
	return corev1.EnvVar{}, false
}

// KubeconfigAs writes a kubeconfig that acts as ServiceAccount
// namespace/name: the bed's own, impersonating it (the admin may), as that
// account's own kubeconfig would.
func (b *Testbed) KubeconfigAs(t *testing.T, namespace, name string) string {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(b.Kubeconfig)
	require.NoError(t, err)
	for _, ai := range kc.AuthInfos {
		ai.Impersonate = "system:serviceaccount:" + namespace + ":" + name
	}
	path := filepath.Join(t.TempDir(), "kubeconfig-"+namespace+"-"+name)
	require.NoError(t, clientcmd.WriteToFile(*kc, path))
	return path
}

// Enable binds the tenant ClusterRole in ns to the scaler's ServiceAccount,
// as `kubectl create rolebinding` does.
func (b *Testbed) Enable(ctx context.Context, t *testing.T, ns, tenantRole, saNS, sa string) {
	t.Helper()
	_, err := b.Kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: tenantRole},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: tenantRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: saNS}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}
