package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// wantsToken says whether the pod gets a service-account token, by the rule the
// ServiceAccount admission plugin applies: the pod's automountServiceAccountToken if
// set, else the ServiceAccount's, else yes.
func wantsToken(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod) (bool, error) {
	if pod.Spec.AutomountServiceAccountToken != nil {
		return *pod.Spec.AutomountServiceAccountToken, nil
	}
	sa, err := client.CoreV1().ServiceAccounts(pod.Namespace).Get(ctx, serviceAccountName(pod), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, configErrorf("serviceaccount %q not found", serviceAccountName(pod))
	}
	if err != nil {
		return false, fmt.Errorf("get serviceaccount: %w", err)
	}
	return sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken, nil
}

func serviceAccountName(pod *corev1.Pod) string {
	if pod.Spec.ServiceAccountName == "" {
		return "default"
	}
	return pod.Spec.ServiceAccountName
}

// mintToken asks the TokenRequest API for a token of the pod's ServiceAccount bound
// to the pod, so it dies with the pod, as the kubelet's projected token does.
func mintToken(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, ttlSeconds int64) (string, error) {
	tr, err := client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, serviceAccountName(pod), &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: &ttlSeconds,
			BoundObjectRef: &authenticationv1.BoundObjectReference{
				Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("request token for serviceaccount %s/%s: %w", pod.Namespace, serviceAccountName(pod), err)
	}
	return tr.Status.Token, nil
}

// writeFileAtomic replaces a file in one rename, so a reader never sees half of it.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// podKubeconfig renders a kubeconfig for a pod's processes. It names the token by
// file (tokenFile): client-go rereads that file, so a refreshed token reaches a
// long-running process without a restart.
func podKubeconfig(server, caFile, tokenFile, namespace string) []byte {
	tls := "    insecure-skip-tls-verify: true\n"
	if caFile != "" {
		tls = "    certificate-authority: " + quote(caFile) + "\n"
	}
	return []byte("apiVersion: v1\nkind: Config\n" +
		"clusters:\n- name: testbed\n  cluster:\n    server: " + quote(server) + "\n" + tls +
		"users:\n- name: pod\n  user:\n    tokenFile: " + quote(tokenFile) + "\n" +
		"contexts:\n- name: pod\n  context:\n    cluster: testbed\n    user: pod\n    namespace: " + quote(namespace) + "\n" +
		"current-context: pod\n")
}

// quote renders a YAML double-quoted scalar (JSON strings are valid YAML).
func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
