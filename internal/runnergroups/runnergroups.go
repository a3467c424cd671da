// Package runnergroups reads RunnerGroups and writes their status through the
// dynamic client, so the scaler needs no generated clientset.
package runnergroups

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// Client lists RunnerGroups and patches their status subresource.
type Client struct {
	Dynamic dynamic.Interface
	// REST, when set, is what List reads with: the API server's JSON
	// decoded straight into the types, a page at a time, instead of the
	// dynamic client's maps (see listPages).
	REST rest.Interface
}

// listPageSize is how many RunnerGroups one list request asks for.
const listPageSize = 500

// List returns the RunnerGroups of one namespace ("" for all) that match the
// label selector. An object that cannot be converted is returned in Broken
// rather than failing the whole list: one bad group must not stop the others.
func (c Client) List(ctx context.Context, namespace, selector string) (groups []v1alpha1.RunnerGroup, broken []Broken, err error) {
	if c.REST != nil {
		groups, broken, err = c.listPages(ctx, namespace, selector)
	} else {
		groups, broken, err = c.listDynamic(ctx, namespace, selector)
	}
	if err != nil {
		where := "all namespaces"
		if namespace != "" {
			where = "namespace " + namespace
		}
		return nil, nil, fmt.Errorf("cannot list RunnerGroups in %s: %w", where, err)
	}
	return groups, broken, nil
}

// listPage is a page of a RunnerGroup list as the API server sends it,
// each item kept as JSON until it is decoded on its own.
type listPage struct {
	Metadata metav1.ListMeta   `json:"metadata"`
	Items    []json.RawMessage `json:"items"`
}

// listPages lists through c.REST, listPageSize groups a request, and
// decodes each item into a RunnerGroup. The dynamic client would hold a
// whole list as nested maps, several times the size of the types, before
// converting: what made a CronJob pass over 5,000 groups peak at 240 MiB.
// managedFields, which a pass never reads, are dropped.
func (c Client) listPages(ctx context.Context, namespace, selector string) (groups []v1alpha1.RunnerGroup, broken []Broken, err error) {
	_, err = c.eachListed(ctx, namespace, selector, "", func(rg *v1alpha1.RunnerGroup, raw []byte, err error) {
		if err != nil {
			var id struct {
				Metadata struct {
					Namespace, Name string
					Labels          map[string]string
				} `json:"metadata"`
			}
			_ = json.Unmarshal(raw, &id)
			broken = append(broken, Broken{Namespace: id.Metadata.Namespace, Name: id.Metadata.Name, Labels: id.Metadata.Labels, Err: err})
			return
		}
		groups = append(groups, *rg)
	})
	return groups, broken, err
}

// eachListed lists through c.REST at resourceVersion (as a list request
// means it), a page at a time, and calls item with each RunnerGroup
// decoded, or with the item's JSON and why it could not be. It returns the
// list's resourceVersion.
func (c Client) eachListed(ctx context.Context, namespace, selector, resourceVersion string, item func(rg *v1alpha1.RunnerGroup, raw []byte, err error)) (string, error) {
	gv := v1alpha1.GroupVersion
	path := []string{"/apis", gv.Group, gv.Version}
	if namespace != "" {
		path = append(path, "namespaces", namespace)
	}
	path = append(path, v1alpha1.GroupVersionResource.Resource)
	next := ""
	for {
		req := c.REST.Get().AbsPath(path...).SetHeader("Accept", "application/json").
			Param("limit", strconv.Itoa(listPageSize))
		if selector != "" {
			req = req.Param("labelSelector", selector)
		}
		if next != "" {
			req = req.Param("continue", next)
		} else if resourceVersion != "" {
			req = req.Param("resourceVersion", resourceVersion)
		}
		raw, err := req.Do(ctx).Raw()
		if err != nil {
			return "", err
		}
		var page listPage
		if err := json.Unmarshal(raw, &page); err != nil {
			return "", fmt.Errorf("cannot decode the list: %w", err)
		}
		for _, it := range page.Items {
			var rg v1alpha1.RunnerGroup
			// Case-sensitive, as the API server and the unstructured
			// converter read field names.
			if err := utiljson.Unmarshal(it, &rg); err != nil {
				item(nil, it, err)
				continue
			}
			rg.ManagedFields = nil
			rg.APIVersion, rg.Kind = gv.String(), v1alpha1.Kind
			item(&rg, nil, nil)
		}
		if page.Metadata.Continue == "" {
			return page.Metadata.ResourceVersion, nil
		}
		next = page.Metadata.Continue
	}
}

// listDynamic lists through the dynamic client.
func (c Client) listDynamic(ctx context.Context, namespace, selector string) (groups []v1alpha1.RunnerGroup, broken []Broken, err error) {
	opts := metav1.ListOptions{LabelSelector: selector}
	for {
		list, err := c.Dynamic.Resource(v1alpha1.GroupVersionResource).Namespace(namespace).List(ctx, opts)
		if err != nil {
			return nil, nil, err
		}
		for i := range list.Items {
			var rg v1alpha1.RunnerGroup
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &rg); err != nil {
				broken = append(broken, Broken{Namespace: list.Items[i].GetNamespace(), Name: list.Items[i].GetName(), Labels: list.Items[i].GetLabels(), Err: err})
				continue
			}
			groups = append(groups, rg)
		}
		if list.GetContinue() == "" {
			return groups, broken, nil
		}
		opts.Continue = list.GetContinue()
	}
}

// Broken is a RunnerGroup that could not be read.
type Broken struct {
	Namespace, Name string
	// Labels are the object's, so a listener's selectors can tell whether
	// the group it could not read is one it serves.
	Labels map[string]string
	Err    error
}

// PatchStatus replaces the group's status with a merge patch on the status
// subresource. A merge patch needs no resourceVersion, so two passes that
// finish together do not fail each other; the later one's view wins.
func (c Client) PatchStatus(ctx context.Context, rg *v1alpha1.RunnerGroup) error {
	body, err := json.Marshal(map[string]any{"status": rg.Status})
	if err != nil {
		return fmt.Errorf("cannot encode status of RunnerGroup %s/%s: %w", rg.Namespace, rg.Name, err)
	}
	_, err = c.Dynamic.Resource(v1alpha1.GroupVersionResource).Namespace(rg.Namespace).
		Patch(ctx, rg.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: v1alpha1.FieldManager}, "status")
	if err != nil {
		return fmt.Errorf("cannot update status of RunnerGroup %s/%s: %w", rg.Namespace, rg.Name, err)
	}
	return nil
}
