// Package v1alpha1 holds the RunnerGroup API (group gitea.bpg.pw, version v1alpha1).
//
// The scaler reads RunnerGroups through the dynamic client and converts them
// into these types, so no generated clientset or deep-copy code is needed.
// crds/ holds the schema the API server enforces; a test keeps the two in step.
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	// Group is the API group of RunnerGroup.
	Group = "gitea.bpg.pw"
	// Version is the API version of RunnerGroup.
	Version = "v1alpha1"
	// Kind is the RunnerGroup kind.
	Kind = "RunnerGroup"
	// Resource is the plural resource name.
	Resource = "runnergroups"
)

// GroupVersion is gitea.bpg.pw/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// GroupVersionResource addresses RunnerGroups with the dynamic client.
var GroupVersionResource = GroupVersion.WithResource(Resource)

// Scope says which Gitea runners a RunnerGroup registers and whose jobs it serves.
type Scope string

// The four scopes Gitea registers runners at.
const (
	ScopeGlobal Scope = "global"
	ScopeOrg    Scope = "org"
	ScopeUser   Scope = "user"
	ScopeRepo   Scope = "repo"
)

// RunnerGroup is a pool of ephemeral Gitea Actions runners: one runner Job per
// queued Gitea job that the pool's labels can serve, up to MaxActiveRunners.
// Its name is at most 50 characters, so that runner Job names
// ({name}-{5 chars}) fit in 63.
type RunnerGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RunnerGroupSpec   `json:"spec"`
	Status RunnerGroupStatus `json:"status,omitempty"`
}

// RunnerGroupList is a list of RunnerGroups.
type RunnerGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RunnerGroup `json:"items"`
}

// RunnerGroupSpec is the desired state of a RunnerGroup.
type RunnerGroupSpec struct {
	// Scope is global, org, user or repo. It decides which of Org, User and
	// Repo must be set and which must not (the CRD refuses other combinations).
	Scope Scope `json:"scope"`
	// Org names the organization: required for scope org, and the repository's
	// owner for scope repo when the owner is an organization. Not allowed with
	// scopes global and user.
	Org string `json:"org,omitempty"`
	// User names the user: required for scope user, and the repository's owner
	// for scope repo when the owner is a user. Not allowed with scopes global
	// and org.
	User string `json:"user,omitempty"`
	// Repo names the repository (without its owner): required for scope repo,
	// not allowed with any other scope.
	Repo string `json:"repo,omitempty"`
	// Gitea says where the Gitea instance is.
	Gitea GiteaSpec `json:"gitea"`
	// Labels are the runner's labels ("name", "name:host" or
	// "name:docker://image"); no two share a name (the part before the first
	// ':'). The scaler's default labels are added, except those whose name a
	// label here already has.
	Labels []string `json:"labels,omitempty"`
	// MaxActiveRunners caps the group's unfinished runner Jobs; 0 pauses the
	// group. The CRD accepts 0 to 1000.
	MaxActiveRunners int32 `json:"maxActiveRunners"`
	// RegistrationToken is the runner registration token of the group's scope.
	RegistrationToken SecretKeySelector `json:"registrationToken"`
	// AuthToken is an API token that can list the scope's Actions jobs.
	AuthToken SecretKeySelector `json:"authToken"`
}

// GiteaSpec locates the Gitea instance.
type GiteaSpec struct {
	// URL is the base URL of the Gitea instance, for example
	// https://gitea.example.com: http or https, with a host, without
	// credentials, query or fragment.
	URL string `json:"url"`
}

// SecretKeySelector points at one key of a Secret in the RunnerGroup's namespace.
type SecretKeySelector struct {
	// SecretRef names the Secret and the key in it.
	SecretRef SecretRef `json:"secretRef"`
}

// SecretRef names a Secret and a key in it.
type SecretRef struct {
	// Name is the Secret's name, in the RunnerGroup's namespace.
	Name string `json:"name"`
	// Key is the key in the Secret's data whose value is the token.
	Key string `json:"key"`
}

// RunnerGroupStatus is what the last scaler pass observed.
type RunnerGroupStatus struct {
	// ActiveRunners counts the group's runner Jobs that have not finished.
	ActiveRunners int32 `json:"activeRunners"`
	// QueuedJobs counts queued Gitea jobs whose labels the group can serve.
	QueuedJobs int32 `json:"queuedJobs"`
	// BlockedJobs counts matching Gitea jobs that wait for their needs or an approval.
	BlockedJobs int32 `json:"blockedJobs"`
	// RunningJobs counts Gitea jobs in progress on this group's runners.
	RunningJobs int32 `json:"runningJobs"`
	// LastCheckTime is when the scaler last asked Gitea for this group's jobs.
	LastCheckTime *metav1.Time `json:"lastCheckTime,omitempty"`
	// ObservedGeneration is the generation of the spec the last pass acted on.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions are Ready and ScalingActive.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
