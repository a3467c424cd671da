//go:build e2e

// Admission tests against the test bed's real kube-apiserver: the RunnerGroup
// CRD's schema and CEL rules, its printer columns, and the policies in
// policies/. Fakes cannot show any of this: only the API server evaluates CEL
// the way production will.
//
// The bed, namespaces, waits and the manifest helpers (ReadObjects, Apply,
// PolicyReady) are the framework's (internal/e2e: bed.go, cluster.go,
// wait.go, manifests.go); what only these tests need starts with "adm". Run
// with:
//
//	scripts/testbed up
//	go test -tags e2e -run 'TestAdmission|TestPolic' ./internal/e2e/admission/ -v
package admission

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// admWants returns the "# want: <phrase>" lines of a testdata file: the
// phrases the API server's refusal must contain. A file without any must be
// admitted.
func admWants(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var wants []string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		if w, ok := strings.CutPrefix(sc.Text(), "# want: "); ok {
			wants = append(wants, w)
		}
	}
	require.NoError(t, sc.Err())
	return wants
}

// admApplyOwned applies obj and, unless it existed before, deletes it when
// the test ends. Objects that existed before belong to someone else (a
// person who applied policies/ by hand, another test): they are updated to
// the manifest but left in place.
func admApplyOwned(b *e2e.Testbed, ctx context.Context, t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	b.WaitNotTerminating(ctx, t, obj)
	res := b.Resource(t, obj)
	_, err := res.Get(ctx, obj.GetName(), metav1.GetOptions{})
	existed := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		require.NoError(t, err)
	}
	b.Apply(ctx, t, obj, false)
	if existed {
		return
	}
	t.Cleanup(func() {
		ctx, cancel := e2e.CleanupContext()
		defer cancel()
		err := res.Delete(ctx, obj.GetName(), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleaning up %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	})
}

// admCreate creates obj (as kubectl create would: strict field validation),
// optionally as a server-side dry run, which still runs all of admission.
func admCreate(b *e2e.Testbed, ctx context.Context, t *testing.T, obj *unstructured.Unstructured, dryRun bool) error {
	t.Helper()
	opts := metav1.CreateOptions{FieldManager: e2e.FieldManager, FieldValidation: metav1.FieldValidationStrict}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err := b.Resource(t, obj).Create(ctx, obj, opts)
	return err
}

// admWaitCRDRules waits until the RunnerGroup CRD's newest schema is
// enforced. The bed applied the CRD and saw it Established, but Established
// does not mean that every API server handler has the new schema yet. A
// probe that only the newest rules refuse shows when it has.
func admWaitCRDRules(b *e2e.Testbed, ctx context.Context, t *testing.T) {
	t.Helper()
	probe := e2e.ReadObject(t, filepath.Join(b.Root, "internal", "e2e", "admission", "testdata", "bad-name-51-chars.yaml"))
	probe.SetNamespace(metav1.NamespaceDefault)
	e2e.Eventually(ctx, t, "the CRD's CEL rules enforced", func(ctx context.Context) (bool, error) {
		err := admCreate(b, ctx, t, probe, true)
		if err == nil {
			return false, errors.New("the probe was admitted")
		}
		return apierrors.IsInvalid(err), err
	})
}

// TestAdmissionRunnerGroups creates every RunnerGroup under
// testdata: good-*.yaml must be admitted, bad-*.yaml refused with
// a message holding each of the file's "# want:" phrases.
func TestAdmissionRunnerGroups(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 3*time.Minute)
	admWaitCRDRules(b, ctx, t)
	ns := b.Namespace(ctx, t, "adm-rg", nil)

	files, err := filepath.Glob(filepath.Join(b.Root, "internal", "e2e", "admission", "testdata", "*.yaml"))
	require.NoError(t, err)
	var good, bad int
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		wants := admWants(t, path)
		switch {
		case strings.HasPrefix(name, "good-"):
			require.Empty(t, wants, "%s is good: it must not want a refusal", path)
			good++
		case strings.HasPrefix(name, "bad-"):
			require.NotEmpty(t, wants, "%s is bad: it must say what the refusal holds", path)
			bad++
		default:
			t.Fatalf("%s: testdata names start with good- or bad-", path)
		}
		t.Run(name, func(t *testing.T) {
			obj := e2e.ReadObject(t, path)
			obj.SetNamespace(ns)
			err := admCreate(b, ctx, t, obj, false)
			if len(wants) == 0 {
				require.NoError(t, err, "a good RunnerGroup must be admitted")
				res := b.Resource(t, obj)
				got, err := res.Get(ctx, obj.GetName(), metav1.GetOptions{})
				require.NoError(t, err)
				assert.Equal(t, obj.Object["spec"], got.Object["spec"], "the stored spec is the one sent: nothing pruned or defaulted")
				require.NoError(t, res.Delete(ctx, obj.GetName(), metav1.DeleteOptions{}))
				return
			}
			require.Error(t, err, "a bad RunnerGroup must be refused")
			assert.True(t, apierrors.IsInvalid(err) || apierrors.IsBadRequest(err), "refused as invalid, not for another reason: %v", err)
			for _, w := range wants {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	assert.GreaterOrEqual(t, good, 5, "good cases")
	assert.GreaterOrEqual(t, bad, 30, "bad cases")
}

// TestAdmissionRunnerGroupStatus checks the status subresource: the scaler's
// fields are accepted there, negative counters are not, and a spec write
// cannot set status.
func TestAdmissionRunnerGroupStatus(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 2*time.Minute)
	admWaitCRDRules(b, ctx, t)
	ns := b.Namespace(ctx, t, "adm-rg-status", nil)

	obj := e2e.ReadObject(t, filepath.Join(b.Root, "internal", "e2e", "admission", "testdata", "good-repo-org-owner.yaml"))
	obj.SetNamespace(ns)
	require.NoError(t, admCreate(b, ctx, t, obj, false))
	res := b.Resource(t, obj)

	now := metav1.Now().UTC().Format(time.RFC3339)
	status := map[string]any{
		"activeRunners": int64(2), "queuedJobs": int64(7), "blockedJobs": int64(1), "runningJobs": int64(2),
		"lastCheckTime": now, "observedGeneration": int64(1),
		"conditions": []any{
			map[string]any{"type": "Ready", "status": "True", "reason": "Polled", "message": "", "lastTransitionTime": now},
			map[string]any{"type": "ScalingActive", "status": "True", "reason": "JobsQueued", "message": "7 queued", "lastTransitionTime": now},
		},
	}
	// The schema refusals name the field from status down: kube-apiserver
	// 1.30 (the chart's floor) reports a status write's schema errors
	// without the "status." prefix that 1.34 and 1.37 put before them.
	tests := map[string]struct {
		mutate func(st map[string]any)
		want   string
	}{
		"the scaler's status": {mutate: func(map[string]any) {}},
		"negative counter": {
			mutate: func(st map[string]any) { st["queuedJobs"] = int64(-1) },
			want:   "queuedJobs: Invalid value: -1",
		},
		"bad condition status": {
			mutate: func(st map[string]any) {
				st["conditions"] = []any{map[string]any{"type": "Ready", "status": "Yes", "reason": "Polled", "message": "", "lastTransitionTime": now}}
			},
			want: `conditions[0].status: Unsupported value: "Yes"`,
		},
		"two conditions of one type": {
			mutate: func(st map[string]any) {
				c := map[string]any{"type": "Ready", "status": "True", "reason": "Polled", "message": "", "lastTransitionTime": now}
				st["conditions"] = []any{c, c}
			},
			want: "status.conditions[1]: Duplicate value",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cur, err := res.Get(ctx, obj.GetName(), metav1.GetOptions{})
			require.NoError(t, err)
			st := map[string]any{}
			for k, v := range status {
				st[k] = v
			}
			tc.mutate(st)
			cur.Object["status"] = st
			_, err = res.UpdateStatus(ctx, cur, metav1.UpdateOptions{FieldManager: e2e.FieldManager})
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}

	t.Run("spec writes cannot set status", func(t *testing.T) {
		cur, err := res.Get(ctx, obj.GetName(), metav1.GetOptions{})
		require.NoError(t, err)
		require.NoError(t, unstructured.SetNestedField(cur.Object, int64(99), "status", "activeRunners"))
		got, err := res.Update(ctx, cur, metav1.UpdateOptions{FieldManager: e2e.FieldManager})
		require.NoError(t, err)
		active, _, _ := unstructured.NestedInt64(got.Object, "status", "activeRunners")
		assert.Equal(t, int64(2), active, "status comes from the status subresource only")
	})

	t.Run("printer columns", func(t *testing.T) {
		// What kubectl get shows: the API server renders the Table from the
		// CRD's additionalPrinterColumns.
		raw, err := b.Kube.Discovery().RESTClient().Get().
			AbsPath("/apis", v1alpha1.Group, v1alpha1.Version, "namespaces", ns, v1alpha1.Resource, obj.GetName()).
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").
			DoRaw(ctx)
		require.NoError(t, err)
		var table metav1.Table
		require.NoError(t, json.Unmarshal(raw, &table))
		require.Len(t, table.Rows, 1)
		cells := map[string]any{}
		for i, col := range table.ColumnDefinitions {
			cells[col.Name] = table.Rows[0].Cells[i]
		}
		assert.Equal(t, "repo", cells["Scope"])
		assert.Equal(t, "acme", cells["Owner"], "the owner column shows the org of a repo group")
		assert.Equal(t, "app.server_v2", cells["Repo"])
		assert.EqualValues(t, 2, cells["Active"])
		assert.EqualValues(t, 5, cells["Max"])
		assert.EqualValues(t, 7, cells["Queued"])
		assert.Equal(t, "True", cells["Ready"])
		assert.Equal(t, "Polled", cells["Reason"], "the Ready condition's reason, to look up when it is not Reconciled")
		assert.Contains(t, cells, "Age")
	})

	t.Run("discovery names", func(t *testing.T) {
		list, err := b.Kube.Discovery().ServerResourcesForGroupVersion(v1alpha1.GroupVersion.String())
		require.NoError(t, err)
		i := slices.IndexFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == v1alpha1.Resource })
		require.GreaterOrEqual(t, i, 0, "runnergroups is served")
		r := list.APIResources[i]
		assert.Equal(t, v1alpha1.Kind, r.Kind)
		assert.True(t, r.Namespaced)
		assert.Equal(t, "runnergroup", r.SingularName)
		assert.Contains(t, r.ShortNames, "rg")
	})
}

// admPoliciesDir is where the shipped policies live.
func admPoliciesDir(b *e2e.Testbed) string { return filepath.Join(b.Root, "policies") }

// TestPolicyRunnerGroupGuardrails applies policies/runnergroup-guardrails*.yaml
// and checks the cap and the https rule with the shipped parameters.
//
// The shipped binding is cluster-wide; applying it as is would refuse the
// plain-http RunnerGroups that other e2e tests point at the bed's loopback
// Gitea while this test runs. So the shipped binding is only validated (a
// server-side dry run), and a copy of it that selects this test's namespace
// is what gets applied. Policy and parameters are applied as shipped.
//
// Policy, parameters and the test binding are left in place on purpose.
// kube-apiserver (1.34, still open upstream: kubernetes/kubernetes#130887)
// stops its ConfigMap param informer for good as soon as no binding uses a
// ConfigMap paramKind, and every later run against the same API server
// process would then be refused with "no params found". The binding keeps
// one fixed name and is re-pointed at each run's namespace; once that
// namespace is gone it matches nothing.
func TestPolicyRunnerGroupGuardrails(t *testing.T) {
	// Alone on the bed: the API server keeps one ConfigMap param informer for every
	// policy, and this test re-points the one binding that keeps it alive.
	e2e.Exclusive(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 3*time.Minute)
	admWaitCRDRules(b, ctx, t)
	ns := b.Namespace(ctx, t, "adm-guardrails", nil)

	var params *unstructured.Unstructured
	for _, obj := range e2e.ReadObjects(t, filepath.Join(admPoliciesDir(b), "runnergroup-guardrails-params.yaml")) {
		b.ApplyKept(ctx, t, obj)
		if obj.GetKind() == "ConfigMap" {
			params = obj
		}
	}
	require.NotNil(t, params, "the params file ships a ConfigMap")
	data, _, _ := unstructured.NestedStringMap(params.Object, "data")
	limit, err := strconv.Atoi(strings.TrimSpace(data["maxActiveRunners"]))
	require.NoError(t, err, "the shipped maxActiveRunners is an integer")
	require.Less(t, limit, 1000, "the shipped cap is below the CRD's own maximum, or this test cannot go over it")
	var allowed []string
	for h := range strings.SplitSeq(data["allowedHTTPHosts"], ",") {
		if h = strings.TrimSpace(h); h != "" {
			allowed = append(allowed, h)
		}
	}
	require.NotEmpty(t, allowed, "the shipped parameters allow some plain-http host")
	require.Contains(t, strings.Split(data["pinnedTemplateFields"], ","), "spec.hostPID", "the shipped parameters pin the host's PID namespace")

	base := e2e.ReadObject(t, filepath.Join(b.Root, "internal", "e2e", "admission", "testdata", "good-org.yaml"))
	base.SetNamespace(ns)
	group := func(name string, maxActive int, url string) *unstructured.Unstructured {
		g := base.DeepCopy()
		g.SetName(name)
		require.NoError(t, unstructured.SetNestedField(g.Object, int64(maxActive), "spec", "maxActiveRunners"))
		require.NoError(t, unstructured.SetNestedField(g.Object, url, "spec", "gitea", "url"))
		return g
	}

	// A group stored before the policy binds, over the cap: the policy must
	// leave its metadata and status writable, and check its next spec write.
	older := group("older", limit+1, "https://gitea.example.com")
	require.NoError(t, admCreate(b, ctx, t, older, false), "before the binding, nothing caps the group")

	var policy, binding *unstructured.Unstructured
	for _, obj := range e2e.ReadObjects(t, filepath.Join(admPoliciesDir(b), "runnergroup-guardrails.yaml")) {
		switch obj.GetKind() {
		case "ValidatingAdmissionPolicy":
			policy = obj
		case "ValidatingAdmissionPolicyBinding":
			binding = obj
		default:
			t.Fatalf("unexpected %s in runnergroup-guardrails.yaml", obj.GetKind())
		}
	}
	require.NotNil(t, policy)
	require.NotNil(t, binding)
	b.ApplyKept(ctx, t, policy)
	b.Apply(ctx, t, binding, true)
	ref, _, _ := unstructured.NestedMap(binding.Object, "spec", "paramRef")
	assert.Equal(t, params.GetName(), ref["name"], "the binding points at the shipped ConfigMap")
	assert.Equal(t, params.GetNamespace(), ref["namespace"])

	testBinding := binding.DeepCopy()
	testBinding.SetName("adm-e2e-" + binding.GetName())
	require.NoError(t, unstructured.SetNestedStringMap(testBinding.Object,
		map[string]string{corev1.LabelMetadataName: ns}, "spec", "matchResources", "namespaceSelector", "matchLabels"))
	b.ApplyKept(ctx, t, testBinding)
	b.PolicyReady(ctx, t, policy.GetName())

	overCap := group("over-cap", limit+1, "https://gitea.example.com")
	overCapWants := []string{
		"runnergroup-guardrails: spec.maxActiveRunners is " + strconv.Itoa(limit+1),
		"above the cap of " + strconv.Itoa(limit),
	}
	// The policy takes effect a moment after it is written.
	e2e.Eventually(ctx, t, "the guardrails policy refusing a group over the cap", func(ctx context.Context) (bool, error) {
		err := admCreate(b, ctx, t, overCap, true)
		if err == nil {
			return false, errors.New("admitted")
		}
		if strings.Contains(err.Error(), "no params found") {
			return false, fmt.Errorf("%w\nThe ConfigMap exists, so this API server has most likely stopped watching "+
				"ConfigMap params after a binding was removed (kubernetes/kubernetes#130887); restart "+
				"kube-apiserver (scripts/testbed down, then up) and run again", err)
		}
		return strings.Contains(err.Error(), overCapWants[0]), err
	})

	type tcase struct {
		obj   *unstructured.Unstructured
		wants []string
	}
	tests := map[string]tcase{
		"over the cap":      {overCap, overCapWants},
		"at the cap":        {group("at-cap", limit, "https://gitea.example.com"), nil},
		"paused":            {group("paused", 0, "https://gitea.example.com"), nil},
		"https to any host": {group("https-any", 1, "https://gitea.internal.example:8443/git"), nil},
		"http to a host not listed": {group("http-not-listed", 1, "http://gitea.example.com"), []string{
			"runnergroup-guardrails: spec.gitea.url http://gitea.example.com must use https",
			"gitea.example.com is not one of them",
		}},
		"http to a host not listed, upper-case scheme": {group("http-upper", 1, "HTTP://gitea.example.com:3000"), []string{
			"must use https",
		}},
		"a template that sets pinned fields": {withTemplate(t, group("pinned-set", 1, "https://gitea.example.com"),
			map[string]any{"spec": map[string]any{"hostPID": true, "hostNetwork": false, "runtimeClassName": "sysbox-runc"}}), []string{
			"runnergroup-guardrails: spec.template sets spec.hostNetwork, spec.hostPID, pinned by this cluster (key pinnedTemplateFields",
		}},
		"a template with fields that are not pinned": {withTemplate(t, group("pinned-free", 1, "https://gitea.example.com"),
			map[string]any{"spec": map[string]any{"runtimeClassName": "sysbox-runc", "containers": []any{map[string]any{"name": "runner", "image": "x"}}}}), nil},
	}
	for i, h := range allowed {
		host := h
		if strings.Contains(h, ":") {
			host = "[" + h + "]" // an IPv6 address
		}
		tests["http to allowed host "+h] = tcase{group(fmt.Sprintf("http-allowed-%d", i), 1, "http://"+host+":3000"), nil}
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := admCreate(b, ctx, t, tc.obj, true)
			if tc.wants == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.True(t, apierrors.IsForbidden(err), "a policy refusal is Forbidden: %v", err)
			assert.Contains(t, err.Error(), "ValidatingAdmissionPolicy '"+policy.GetName()+"'")
			for _, w := range tc.wants {
				assert.Contains(t, err.Error(), w)
			}
		})
	}

	// runner.<field> paths, through a second binding of the policy with
	// parameters of its own, bound to a namespace of its own (both kept, as
	// the first binding is).
	t.Run("pinned fields of the runner container", func(t *testing.T) {
		pinnedNS := b.Namespace(ctx, t, "adm-pinned", nil)
		own := params.DeepCopy()
		own.SetName("adm-e2e-pinned")
		own.SetLabels(nil)
		require.NoError(t, unstructured.SetNestedStringMap(own.Object, map[string]string{"pinnedTemplateFields": "runner.image, runner.securityContext ,spec.nodeSelector"}, "data"))
		b.ApplyKept(ctx, t, own)
		pinnedBinding := binding.DeepCopy()
		pinnedBinding.SetName("adm-e2e-pinned-" + binding.GetName())
		require.NoError(t, unstructured.SetNestedStringMap(pinnedBinding.Object,
			map[string]string{corev1.LabelMetadataName: pinnedNS}, "spec", "matchResources", "namespaceSelector", "matchLabels"))
		require.NoError(t, unstructured.SetNestedField(pinnedBinding.Object, own.GetName(), "spec", "paramRef", "name"))
		b.ApplyKept(ctx, t, pinnedBinding)
		g := func(name string, tmpl map[string]any) *unstructured.Unstructured {
			obj := withTemplate(t, group(name, 1, "https://gitea.example.com"), tmpl)
			obj.SetNamespace(pinnedNS)
			return obj
		}
		setImage := g("runner-image", map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "runner", "image": "mine"}, map[string]any{"name": "side", "securityContext": map[string]any{"privileged": false}}}}})
		e2e.Eventually(ctx, t, "the second binding refusing a pinned runner field", func(ctx context.Context) (bool, error) {
			err := admCreate(b, ctx, t, setImage, true)
			if err == nil {
				return false, errors.New("admitted")
			}
			return strings.Contains(err.Error(), "spec.template sets runner.image, pinned"), err
		})
		err := admCreate(b, ctx, t, g("side-only", map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "side", "image": "mine", "securityContext": map[string]any{"privileged": false}}}}}), true)
		assert.NoError(t, err, "a sidecar's image and securityContext are not the runner's")
		err = admCreate(b, ctx, t, g("two-pinned", map[string]any{"spec": map[string]any{"nodeSelector": map[string]any{"a": "b"},
			"containers": []any{map[string]any{"name": "runner", "securityContext": map[string]any{"privileged": false}}}}}), true)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "spec.template sets runner.securityContext, spec.nodeSelector, pinned")
	})

	// allowedGiteaURLs, through a binding of its own: the chart's rule
	// (scheme, host and port equal, the path under the entry's on a segment
	// boundary) at admission.
	t.Run("allowed Gitea URLs", func(t *testing.T) {
		urlNS := b.Namespace(ctx, t, "adm-urls", nil)
		own := params.DeepCopy()
		own.SetName("adm-e2e-urls")
		own.SetLabels(nil)
		require.NoError(t, unstructured.SetNestedStringMap(own.Object, map[string]string{
			"allowedGiteaURLs": " https://Gitea.example.com/gitea/ , http://127.0.0.1:3000",
			"allowedHTTPHosts": "127.0.0.1",
		}, "data"))
		b.ApplyKept(ctx, t, own)
		urlBinding := binding.DeepCopy()
		urlBinding.SetName("adm-e2e-urls-" + binding.GetName())
		require.NoError(t, unstructured.SetNestedStringMap(urlBinding.Object,
			map[string]string{corev1.LabelMetadataName: urlNS}, "spec", "matchResources", "namespaceSelector", "matchLabels"))
		require.NoError(t, unstructured.SetNestedField(urlBinding.Object, own.GetName(), "spec", "paramRef", "name"))
		b.ApplyKept(ctx, t, urlBinding)
		g := func(name, url string) *unstructured.Unstructured {
			obj := group(name, 1, url)
			obj.SetNamespace(urlNS)
			return obj
		}
		const refusal = "is under none of the Gitea URLs this cluster allows (key allowedGiteaURLs"
		e2e.Eventually(ctx, t, "the URL binding refusing a host not listed", func(ctx context.Context) (bool, error) {
			err := admCreate(b, ctx, t, g("other-host", "https://other.example.com/gitea"), true)
			if err == nil {
				return false, errors.New("admitted")
			}
			return strings.Contains(err.Error(), refusal), err
		})
		for name, tc := range map[string]struct {
			url     string
			allowed bool
		}{
			"the entry itself":               {"https://gitea.example.com/gitea", true},
			"below it, default port written": {"https://GITEA.example.com:443/gitea/sub/", true},
			"the loopback entry":             {"http://127.0.0.1:3000", true},
			"the loopback entry, a path":     {"http://127.0.0.1:3000/x", true},
			"a sibling path":                 {"https://gitea.example.com/gitea2", false},
			"above the entry's path":         {"https://gitea.example.com/", false},
			"another port":                   {"https://gitea.example.com:8443/gitea", false},
			"another loopback port":          {"http://127.0.0.1:3001", false},
			"another scheme":                 {"https://127.0.0.1:3000", false},
			"out through a dot segment":      {"https://gitea.example.com/gitea/../admin", false},
		} {
			t.Run(name, func(t *testing.T) {
				err := admCreate(b, ctx, t, g("u-"+strings.NewReplacer(" ", "-", ",", "", "(", "", ")", "", "'", "").Replace(name), tc.url), true)
				if tc.allowed {
					require.NoError(t, err)
					return
				}
				require.Error(t, err)
				assert.True(t, apierrors.IsForbidden(err), "a policy refusal is Forbidden: %v", err)
				assert.Contains(t, err.Error(), refusal)
				assert.Contains(t, err.Error(), "https://Gitea.example.com/gitea/, http://127.0.0.1:3000", "the message lists the allowed URLs")
			})
		}
	})

	// The namespace's grant (issue 19), through a binding of its own on a
	// namespace the platform annotated: the guardrails policy reads the
	// annotations from namespaceObject, so no parameter names the grant.
	t.Run("a namespace's grant", func(t *testing.T) {
		grantNS := b.Namespace(ctx, t, "adm-grant", nil)
		nsObj, err := b.Kube.CoreV1().Namespaces().Get(ctx, grantNS, metav1.GetOptions{})
		require.NoError(t, err)
		nsObj.Annotations = map[string]string{
			tenancy.AnnotationGrantedGiteaURLs:    "https://gitea.example.com",
			tenancy.AnnotationGrantedRepositories: "Team-B, contoso/tools",
		}
		_, err = b.Kube.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{})
		require.NoError(t, err)
		grantBinding := binding.DeepCopy()
		grantBinding.SetName("adm-e2e-grant-" + binding.GetName())
		require.NoError(t, unstructured.SetNestedStringMap(grantBinding.Object,
			map[string]string{corev1.LabelMetadataName: grantNS}, "spec", "matchResources", "namespaceSelector", "matchLabels"))
		b.ApplyKept(ctx, t, grantBinding)
		g := func(name, url string, spec map[string]any) *unstructured.Unstructured {
			obj := group(name, 1, url)
			obj.SetNamespace(grantNS)
			for k, v := range spec {
				require.NoError(t, unstructured.SetNestedField(obj.Object, v, "spec", k))
			}
			for _, k := range []string{"org", "user", "repo"} {
				if _, set := spec[k]; !set {
					unstructured.RemoveNestedField(obj.Object, "spec", k)
				}
			}
			return obj
		}
		const refusal = "is not granted to namespace " // + grantNS
		e2e.Eventually(ctx, t, "the grant binding refusing another team's repository", func(ctx context.Context) (bool, error) {
			err := admCreate(b, ctx, t, g("contoso-web", "https://gitea.example.com", map[string]any{"scope": "repo", "org": "contoso", "repo": "web"}), true)
			if err == nil {
				return false, errors.New("admitted")
			}
			return strings.Contains(err.Error(), refusal+grantNS), err
		})
		for name, tc := range map[string]struct {
			url   string
			spec  map[string]any
			wants string
		}{
			"its own org":                          {"https://gitea.example.com", map[string]any{"scope": "org", "org": "team-b"}, ""},
			"a repository of its own org":          {"https://gitea.example.com", map[string]any{"scope": "repo", "org": "TEAM-B", "repo": "x"}, ""},
			"the one repository granted elsewhere": {"https://gitea.example.com", map[string]any{"scope": "repo", "org": "contoso", "repo": "Tools"}, ""},
			"another team's repository":            {"https://gitea.example.com", map[string]any{"scope": "repo", "org": "contoso", "repo": "web"}, "repository contoso/web is not granted to namespace " + grantNS},
			"the owner of a granted repository":    {"https://gitea.example.com", map[string]any{"scope": "org", "org": "contoso"}, "owner contoso is not granted"},
			"a user of the same name as no grant":  {"https://gitea.example.com", map[string]any{"scope": "user", "user": "contoso"}, "owner contoso is not granted"},
			"every repository":                     {"https://gitea.example.com", map[string]any{"scope": "global"}, "every repository (scope global) is not granted"},
			"a Gitea not granted":                  {"https://other.example.com", map[string]any{"scope": "org", "org": "team-b"}, "spec.gitea.url https://other.example.com is not granted to namespace " + grantNS},
		} {
			t.Run(name, func(t *testing.T) {
				err := admCreate(b, ctx, t, g("g-"+strings.ToLower(strings.NewReplacer(" ", "-", "'", "").Replace(name)), tc.url, tc.spec), true)
				if tc.wants == "" {
					require.NoError(t, err)
					return
				}
				require.Error(t, err)
				assert.True(t, apierrors.IsForbidden(err), "a policy refusal is Forbidden: %v", err)
				assert.Contains(t, err.Error(), tc.wants)
				assert.Contains(t, err.Error(), "set by the platform team")
			})
		}
	})

	t.Run("a group stored over the cap", func(t *testing.T) {
		res := b.Resource(t, older)
		merge := func(patch string, subresources ...string) error {
			_, err := res.Patch(ctx, older.GetName(), types.MergePatchType, []byte(patch),
				metav1.PatchOptions{FieldManager: e2e.FieldManager}, subresources...)
			return err
		}
		require.NoError(t, merge(`{"metadata":{"labels":{"touched":"yes"}}}`),
			"a metadata-only write is not checked")
		require.NoError(t, merge(`{"status":{"queuedJobs":3}}`, "status"),
			"the scaler's status writes are not checked")
		err := merge(`{"spec":{"labels":["linux:host"]}}`)
		require.Error(t, err, "a spec write is checked")
		for _, w := range overCapWants {
			assert.Contains(t, err.Error(), w)
		}
		require.NoError(t, merge(fmt.Sprintf(`{"spec":{"maxActiveRunners":%d}}`, limit)),
			"bringing the group under the cap is admitted")
	})
}

// withTemplate sets spec.template of a RunnerGroup and returns it.
func withTemplate(t *testing.T, g *unstructured.Unstructured, tmpl map[string]any) *unstructured.Unstructured {
	t.Helper()
	require.NoError(t, unstructured.SetNestedField(g.Object, tmpl, "spec", "template"))
	return g
}

// TestPolicyRestrictedPods applies policies/restricted-pods.yaml as shipped
// (its binding selects namespaces by a label that only this test's namespace
// carries) and runs the pods and workloads under
// testdata/policies through it.
func TestPolicyRestrictedPods(t *testing.T) {
	// Alone on the bed: a cluster-wide admission policy comes and goes.
	e2e.Exclusive(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 3*time.Minute)
	var policyName string
	for _, obj := range e2e.ReadObjects(t, filepath.Join(admPoliciesDir(b), "restricted-pods.yaml")) {
		admApplyOwned(b, ctx, t, obj)
		if obj.GetKind() == "ValidatingAdmissionPolicy" {
			policyName = obj.GetName()
		}
	}
	require.NotEmpty(t, policyName)
	restricted := b.Namespace(ctx, t, "adm-restricted", map[string]string{e2e.RestrictedLabel: "true"})
	open := b.Namespace(ctx, t, "adm-unrestricted", nil)
	b.PolicyReady(ctx, t, policyName)

	dir := filepath.Join(b.Root, "internal", "e2e", "admission", "testdata", "policies")
	load := func(t *testing.T, name, ns string) *unstructured.Unstructured {
		obj := e2e.ReadObject(t, filepath.Join(dir, name+".yaml"))
		obj.SetNamespace(ns)
		return obj
	}
	bare := load(t, "bad-pod-bare", restricted)
	e2e.Eventually(ctx, t, "the restricted-pods policy refusing a bare pod", func(ctx context.Context) (bool, error) {
		err := admCreate(b, ctx, t, bare, true)
		if err == nil {
			return false, errors.New("admitted")
		}
		return strings.Contains(err.Error(), "restricted-pods/"), err
	})

	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 10)
	kinds := map[string]bool{}
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		wants := admWants(t, path)
		t.Run(name, func(t *testing.T) {
			obj := load(t, name, restricted)
			kinds[obj.GetKind()] = true
			err := admCreate(b, ctx, t, obj, true)
			if strings.HasPrefix(name, "good-") {
				require.Empty(t, wants)
				require.NoError(t, err, "a compliant %s must be admitted", obj.GetKind())
				return
			}
			require.NotEmpty(t, wants, "%s must say what the refusal holds", path)
			require.Error(t, err, "a %s that breaks the policy must be refused", obj.GetKind())
			assert.True(t, apierrors.IsForbidden(err), "refused by the policy, not for another reason: %v", err)
			assert.Contains(t, err.Error(), "ValidatingAdmissionPolicy '"+policyName+"'")
			for _, w := range wants {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	assert.Subset(t, slices.Sorted(maps.Keys(kinds)), []string{"Pod", "Deployment", "Job", "CronJob"}, "kinds covered")

	t.Run("namespaces without the label are not checked", func(t *testing.T) {
		// Where runner Jobs run: their dind pods could never pass.
		require.NoError(t, admCreate(b, ctx, t, load(t, "bad-pod-bare", open), true))
		require.NoError(t, admCreate(b, ctx, t, load(t, "bad-deployment-writable-root", open), true))
	})

	t.Run("metadata-only updates of older pods go through", func(t *testing.T) {
		// A pod created before its namespace was labelled must still accept
		// label and finalizer changes, or it could not be cleaned up.
		ns := b.Namespace(ctx, t, "adm-labelled-later", nil)
		pod := load(t, "bad-pod-bare", ns)
		require.NoError(t, admCreate(b, ctx, t, pod, false))
		nsObj, err := b.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		require.NoError(t, err)
		if nsObj.Labels == nil {
			nsObj.Labels = map[string]string{}
		}
		nsObj.Labels[e2e.RestrictedLabel] = "true"
		_, err = b.Kube.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{})
		require.NoError(t, err)
		e2e.Eventually(ctx, t, "the policy covering the newly labelled namespace", func(ctx context.Context) (bool, error) {
			probe := load(t, "bad-pod-bare", ns)
			probe.SetName("probe")
			err := admCreate(b, ctx, t, probe, true)
			return err != nil && strings.Contains(err.Error(), "restricted-pods/"), err
		})
		res := b.Resource(t, pod)
		patch := []byte(`{"metadata":{"labels":{"touched":"yes"}}}`)
		_, err = res.Patch(ctx, pod.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: e2e.FieldManager})
		require.NoError(t, err, "a label change is not a pod spec change")
		zero := int64(0)
		require.NoError(t, res.Delete(ctx, pod.GetName(), metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	})
}
