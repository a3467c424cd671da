package agent

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// PodIP is the address every played pod reports: its processes run on this host.
const PodIP = "127.0.0.1"

// Env is an ordered environment; a later Set of a name replaces the value in place,
// which is how the kubelet merges envFrom and env.
type Env struct {
	names  []string
	values map[string]string
}

// Set adds or replaces a variable.
func (e *Env) Set(name, value string) {
	if e.values == nil {
		e.values = map[string]string{}
	}
	if _, ok := e.values[name]; !ok {
		e.names = append(e.names, name)
	}
	e.values[name] = value
}

// Get returns a variable and whether it is set.
func (e *Env) Get(name string) (string, bool) {
	v, ok := e.values[name]
	return v, ok
}

// Names lists the variables in the order they were first set.
func (e *Env) Names() []string { return append([]string(nil), e.names...) }

// List renders the environment as NAME=value strings for exec.
func (e *Env) List() []string {
	out := make([]string, 0, len(e.names))
	for _, n := range e.names {
		out = append(out, n+"="+e.values[n])
	}
	return out
}

// Merge sets every variable of o, in o's order.
func (e *Env) Merge(o *Env) {
	for _, n := range o.names {
		e.Set(n, o.values[n])
	}
}

// ConfigError is an environment that cannot be resolved yet (a missing Secret, say);
// the kubelet reports it as CreateContainerConfigError and retries.
type ConfigError struct{ msg string }

func (e *ConfigError) Error() string { return e.msg }

func configErrorf(format string, args ...any) error {
	return &ConfigError{msg: fmt.Sprintf(format, args...)}
}

var envNameRE = regexp.MustCompile(`^[-._a-zA-Z][-._a-zA-Z0-9]*$`)

// envResolver resolves container environments of one pod, reading each Secret and
// ConfigMap once.
type envResolver struct {
	client     kubernetes.Interface
	pod        *corev1.Pod
	secrets    map[string]*corev1.Secret
	configMaps map[string]*corev1.ConfigMap
}

func newEnvResolver(client kubernetes.Interface, pod *corev1.Pod) *envResolver {
	return &envResolver{client: client, pod: pod, secrets: map[string]*corev1.Secret{}, configMaps: map[string]*corev1.ConfigMap{}}
}

// ResolveEnv computes a container's environment like the kubelet: envFrom sources in
// order, then env entries, each able to refer to earlier ones with $(NAME). Error
// messages name the missing object or key, never a value.
func ResolveEnv(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, c *corev1.Container) (*Env, error) {
	return newEnvResolver(client, pod).resolve(ctx, c)
}

func (r *envResolver) resolve(ctx context.Context, c *corev1.Container) (*Env, error) {
	env := &Env{}
	for _, from := range c.EnvFrom {
		var data map[string]string
		switch {
		case from.SecretRef != nil:
			s, err := r.secret(ctx, from.SecretRef.Name, from.SecretRef.Optional)
			if err != nil {
				return nil, err
			}
			if s != nil {
				data = make(map[string]string, len(s.Data))
				for k, v := range s.Data {
					data[k] = string(v)
				}
			}
		case from.ConfigMapRef != nil:
			cm, err := r.configMap(ctx, from.ConfigMapRef.Name, from.ConfigMapRef.Optional)
			if err != nil {
				return nil, err
			}
			if cm != nil {
				data = cm.Data
			}
		}
		for _, k := range sortedKeys(data) {
			name := from.Prefix + k
			// The kubelet skips keys that are not valid variable names.
			if envNameRE.MatchString(name) {
				env.Set(name, data[k])
			}
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env.Set(e.Name, Expand(e.Value, env))
			continue
		}
		v, ok, err := r.valueFrom(ctx, c, e.Name, e.ValueFrom)
		if err != nil {
			return nil, err
		}
		if ok {
			env.Set(e.Name, v)
		}
	}
	return env, nil
}

// valueFrom resolves one valueFrom; ok is false when an optional source is missing.
func (r *envResolver) valueFrom(ctx context.Context, c *corev1.Container, name string, src *corev1.EnvVarSource) (string, bool, error) {
	switch {
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s, err := r.secret(ctx, ref.Name, ref.Optional)
		if err != nil || s == nil {
			return "", false, err
		}
		v, ok := s.Data[ref.Key]
		if !ok {
			if isOptional(ref.Optional) {
				return "", false, nil
			}
			return "", false, configErrorf("couldn't find key %s in Secret %s/%s", ref.Key, r.pod.Namespace, ref.Name)
		}
		return string(v), true, nil
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		cm, err := r.configMap(ctx, ref.Name, ref.Optional)
		if err != nil || cm == nil {
			return "", false, err
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			if isOptional(ref.Optional) {
				return "", false, nil
			}
			return "", false, configErrorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, r.pod.Namespace, ref.Name)
		}
		return v, true, nil
	case src.FieldRef != nil:
		v, err := FieldValue(r.pod, src.FieldRef.FieldPath)
		if err != nil {
			return "", false, configErrorf("env %s: %v", name, err)
		}
		return v, true, nil
	case src.ResourceFieldRef != nil:
		v, err := resourceValue(c, src.ResourceFieldRef)
		if err != nil {
			return "", false, configErrorf("env %s: %v", name, err)
		}
		return v, true, nil
	default:
		return "", false, configErrorf("env %s: unsupported valueFrom", name)
	}
}

func isOptional(o *bool) bool { return o != nil && *o }

func (r *envResolver) secret(ctx context.Context, name string, optional *bool) (*corev1.Secret, error) {
	if s, ok := r.secrets[name]; ok {
		return s, nil
	}
	s, err := r.client.CoreV1().Secrets(r.pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && isOptional(optional):
		s = nil
	case apierrors.IsNotFound(err):
		return nil, configErrorf("secret %q not found", name)
	case err != nil:
		return nil, fmt.Errorf("get secret %s/%s: %w", r.pod.Namespace, name, err)
	}
	r.secrets[name] = s
	return s, nil
}

func (r *envResolver) configMap(ctx context.Context, name string, optional *bool) (*corev1.ConfigMap, error) {
	if cm, ok := r.configMaps[name]; ok {
		return cm, nil
	}
	cm, err := r.client.CoreV1().ConfigMaps(r.pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && isOptional(optional):
		cm = nil
	case apierrors.IsNotFound(err):
		return nil, configErrorf("configmap %q not found", name)
	case err != nil:
		return nil, fmt.Errorf("get configmap %s/%s: %w", r.pod.Namespace, name, err)
	}
	r.configMaps[name] = cm
	return cm, nil
}

var subscriptRE = regexp.MustCompile(`^metadata\.(labels|annotations)\['(.+)'\]$`)

// FieldValue resolves a downward-API field path of the pod.
func FieldValue(pod *corev1.Pod, fieldPath string) (string, error) {
	if m := subscriptRE.FindStringSubmatch(fieldPath); m != nil {
		if m[1] == "labels" {
			return pod.Labels[m[2]], nil
		}
		return pod.Annotations[m[2]], nil
	}
	switch fieldPath {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs", "status.hostIP", "status.hostIPs":
		return PodIP, nil
	default:
		return "", fmt.Errorf("unsupported fieldPath %q", fieldPath)
	}
}

func resourceValue(c *corev1.Container, ref *corev1.ResourceFieldSelector) (string, error) {
	kind, res, ok := strings.Cut(ref.Resource, ".")
	if !ok {
		return "", fmt.Errorf("unsupported resource %q", ref.Resource)
	}
	var list corev1.ResourceList
	switch kind {
	case "limits":
		list = c.Resources.Limits
	case "requests":
		list = c.Resources.Requests
	default:
		return "", fmt.Errorf("unsupported resource %q", ref.Resource)
	}
	q, ok := list[corev1.ResourceName(res)]
	if !ok {
		// Without a limit the kubelet reports the node's capacity; a fake node has
		// plenty, and tests only need a number.
		return "0", nil
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	// Round up, as the kubelet does, so a request of 100m cpu never reads as 0 cores.
	v := (q.MilliValue() + divisor.MilliValue() - 1) / divisor.MilliValue()
	return strconv.FormatInt(v, 10), nil
}

// Expand replaces $(NAME) with the value of NAME in env, as the kubelet does in env
// values, commands and args: $$ escapes a dollar and unknown names stay as written.
func Expand(s string, env *Env) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := env.Get(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// ExpandAll expands every element of a command or args list.
func ExpandAll(list []string, env *Env) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = Expand(s, env)
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	// Deterministic order makes process environments comparable between runs.
	return slices.Sorted(maps.Keys(m))
}
