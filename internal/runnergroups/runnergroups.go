// Package runnergroups reads RunnerGroups and writes their status through the
// dynamic client, so the scaler needs no generated clientset.
package runnergroups

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// Client lists RunnerGroups and patches their status subresource.
type Client struct {
	Dynamic dynamic.Interface
}

// List returns the RunnerGroups of one namespace ("" for all) that match the
// label selector. An object that cannot be converted is returned in Broken
// rather than failing the whole list: one bad group must not stop the others.
func (c Client) List(ctx context.Context, namespace, selector string) (groups []v1alpha1.RunnerGroup, broken []Broken, err error) {
	opts := metav1.ListOptions{LabelSelector: selector}
	for {
		list, err := c.Dynamic.Resource(v1alpha1.GroupVersionResource).Namespace(namespace).List(ctx, opts)
		if err != nil {
			where := "all namespaces"
			if namespace != "" {
				where = "namespace " + namespace
			}
			return nil, nil, fmt.Errorf("cannot list RunnerGroups in %s: %w", where, err)
		}
		for i := range list.Items {
			var rg v1alpha1.RunnerGroup
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &rg); err != nil {
				broken = append(broken, Broken{Namespace: list.Items[i].GetNamespace(), Name: list.Items[i].GetName(), Err: err})
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
	Err             error
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
