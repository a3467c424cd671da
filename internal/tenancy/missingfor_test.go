package tenancy

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
)

func TestServiceAccountIdentity(t *testing.T) {
	id, err := ServiceAccountIdentity("gitea-runner:scaler")
	require.NoError(t, err)
	assert.Equal(t, Identity{User: "system:serviceaccount:gitea-runner:scaler",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:gitea-runner", "system:authenticated"}}, id)
	for _, bad := range []string{"", "scaler", ":scaler", "gitea-runner:", "a:b:c"} {
		_, err := ServiceAccountIdentity(bad)
		assert.Error(t, err, "%q", bad)
	}
}

// The why command asks, with its user's rights, whether the scaler holds
// its Rights in a namespace (issue 36): one LocalSubjectAccessReview per
// right for the scaler's identity, or the scaler's own review when the
// caller is the scaler.
func TestMissingForAsksAboutTheScalerNotTheCaller(t *testing.T) {
	scaler := Identity{User: "system:serviceaccount:gitea-runner:scaler", Groups: []string{"system:serviceaccounts"}}
	tests := []struct {
		name    string
		caller  string
		allow   func(authorizationv1.LocalSubjectAccessReview) bool
		lsarErr error
		missing []string
		err     string
		rulesN  int
	}{
		{name: "enabled for the scaler", caller: "alice",
			allow: func(r authorizationv1.LocalSubjectAccessReview) bool {
				return r.Spec.User == scaler.User && r.Namespace == "ci" && r.Spec.ResourceAttributes.Namespace == "ci"
			}},
		{name: "the scaler lacks a right", caller: "alice",
			allow: func(r authorizationv1.LocalSubjectAccessReview) bool {
				return r.Spec.User == scaler.User && r.Spec.ResourceAttributes.Resource != "secrets"
			},
			missing: []string{"get secrets", "create secrets", "update secrets"}},
		{name: "the caller may not ask", caller: "alice",
			lsarErr: apierrors.NewForbidden(schema.GroupResource{Group: "authorization.k8s.io", Resource: "localsubjectaccessreviews"}, "", errors.New("no")),
			err:     "cannot tell whether system:serviceaccount:gitea-runner:scaler may create jobs.batch in namespace ci"},
		{name: "the caller is the scaler: its own review", caller: scaler.User, rulesN: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &reviews{rules: tenantRules}
			c := r.client()
			c.PrependReactor("create", "selfsubjectreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
				return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: authenticationv1.UserInfo{Username: tt.caller}}}, nil
			})
			c.PrependReactor("create", "localsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if tt.lsarErr != nil {
					return true, nil, tt.lsarErr
				}
				lr := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.LocalSubjectAccessReview).DeepCopy()
				lr.Status.Allowed = tt.allow(*lr)
				return true, lr, nil
			})
			missing, err := MissingFor(context.Background(), c, "ci", scaler)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			var got []string
			for _, m := range missing {
				got = append(got, m.String())
			}
			assert.Equal(t, tt.missing, got)
			assert.Equal(t, tt.rulesN, r.rulesN)
		})
	}
}
