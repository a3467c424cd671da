package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
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

// Scope says at which level the runners register in Gitea and so whose jobs
// they serve.
// +kubebuilder:validation:Enum=global;org;user;repo
type Scope string

// The four scopes Gitea registers runners at.
const (
	ScopeGlobal Scope = "global"
	ScopeOrg    Scope = "org"
	ScopeUser   Scope = "user"
	ScopeRepo   Scope = "repo"
)

// Runner Jobs are named {group}-{5 random characters} and carry the group's
// name as a label value; both must fit in 63 characters, hence the rule on
// metadata.name. That rule's fieldPath must name a property of the schema,
// and controller-gen leaves metadata bare: make generate declares
// metadata.name afterwards (scripts/tools/controller-gen/finishcrd).
//
// A printer column shows one JSONPath result: the union in
// Owner yields whichever of org and user is set (the schema allows at most
// one), so that column holds the owner for every scope and Repo adds the
// repository.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=runnergroups,singular=runnergroup,scope=Namespaced,shortName=rg,categories=gitea
// +kubebuilder:metadata:labels={"app.kubernetes.io/name=gitea-runner-operator","app.kubernetes.io/component=crd"}
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="!has(self.metadata.name) || size(self.metadata.name) <= 50",message="metadata.name must be at most 50 characters: runner Job names are the group name, '-' and 5 random characters, and must fit in 63",fieldPath=".metadata.name"
// +kubebuilder:printcolumn:name="Scope",type=string,JSONPath=".spec.scope",description="Scope at which the runners register (global, org, user or repo)."
// +kubebuilder:printcolumn:name="Owner",type=string,JSONPath=`.spec['org','user']`,description="Organization or user the runners register at, or the repository's owner for scope repo."
// +kubebuilder:printcolumn:name="Repo",type=string,JSONPath=".spec.repo",description="Repository the runners register at (scope repo only)."
// +kubebuilder:printcolumn:name="Active",type=integer,JSONPath=".status.activeRunners",description="Runner Jobs of this group that have not finished."
// +kubebuilder:printcolumn:name="Max",type=integer,JSONPath=".spec.maxActiveRunners",description="Most runner Jobs this group may have at once; 0 (or spec.suspend) pauses the group."
// +kubebuilder:printcolumn:name="Queued",type=integer,JSONPath=".status.queuedJobs",description="Queued Gitea jobs that this group's labels can serve."
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Status of the Ready condition."
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,description="Reason of the Ready condition: what to look up in the troubleshooting table when it is not Reconciled."
// +kubebuilder:printcolumn:name="Suspend",type=boolean,priority=1,JSONPath=".spec.suspend",description="Whether spec.suspend pauses the group."
// +kubebuilder:printcolumn:name="Warm",type=integer,priority=1,JSONPath=".status.warmRunners",description="Idle runners the warm pool keeps ready (at most spec.minIdleRunners)."
// +kubebuilder:printcolumn:name="Running",type=integer,priority=1,JSONPath=".status.runningJobs",description="Gitea jobs in progress on this group's runners."
// +kubebuilder:printcolumn:name="Blocked",type=integer,priority=1,JSONPath=".status.blockedJobs",description="Matching Gitea jobs that wait for their needs or an approval."
// +kubebuilder:printcolumn:name="Cache",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Cache")].reason`,description="Whether the namespace's shared cache server answers (the Cache condition; empty without the chart's runnerCache)."
// +kubebuilder:printcolumn:name="URL",type=string,priority=1,JSONPath=".spec.gitea.url",description="Base URL of the Gitea instance."
// +kubebuilder:printcolumn:name="Last Check",type=date,priority=1,JSONPath=".status.lastCheckTime",description="When a pass that changed the status asked Gitea; refreshed at least every 5m while the group is served."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"

// RunnerGroup is a pool of ephemeral Gitea Actions runners: the scaler starts
// one runner Job per queued Gitea job that the group's labels can serve, up
// to spec.maxActiveRunners at once. Its name is at most 50 characters, so
// that the names of its runner Jobs fit in 63.
type RunnerGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the RunnerGroup.
	Spec RunnerGroupSpec `json:"spec"`
	// Status is what the scaler's last pass observed. Only the scaler writes
	// it.
	Status RunnerGroupStatus `json:"status,omitempty"`
}

// RunnerGroupList is a list of RunnerGroups.
//
// +kubebuilder:object:root=true
type RunnerGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RunnerGroup `json:"items"`
}

// RunnerGroupSpec is the desired state of a RunnerGroup.
//
// Which of org, user and repo a scope takes is said by the rules below: one
// rule per field and direction, so that each refusal names the field to add
// or remove.
//
// +kubebuilder:validation:XValidation:rule="self.scope != 'org' || has(self.org)",message="spec.org is required when spec.scope is org",fieldPath=".org",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="self.scope != 'user' || has(self.user)",message="spec.user is required when spec.scope is user",fieldPath=".user",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="self.scope != 'repo' || has(self.repo)",message="spec.repo is required when spec.scope is repo",fieldPath=".repo",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="self.scope != 'repo' || has(self.org) != has(self.user)",message="spec.scope repo needs exactly one of spec.org or spec.user, naming the repository's owner"
// +kubebuilder:validation:XValidation:rule="!has(self.org) || self.scope in ['org', 'repo']",message="spec.org is allowed only with spec.scope org or repo",messageExpression="'spec.org is not allowed with spec.scope ' + self.scope + ': only scopes org and repo name an organization'",fieldPath=".org",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.user) || self.scope in ['user', 'repo']",message="spec.user is allowed only with spec.scope user or repo",messageExpression="'spec.user is not allowed with spec.scope ' + self.scope + ': only scopes user and repo name a user'",fieldPath=".user",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.repo) || self.scope == 'repo'",message="spec.repo is allowed only with spec.scope repo",messageExpression="'spec.repo is not allowed with spec.scope ' + self.scope + ': only scope repo names a repository'",fieldPath=".repo",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.minIdleRunners) || self.minIdleRunners <= self.maxActiveRunners",message="spec.minIdleRunners must be at most spec.maxActiveRunners: warm runners count against the cap",fieldPath=".minIdleRunners",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="!has(self.registrationToken) || self.registrationToken.secretRef.name != self.authToken.secretRef.name || self.registrationToken.secretRef.key != self.authToken.secretRef.key",message="spec.registrationToken and spec.authToken name the same key of the same Secret: the registration token reaches the runner pod and the API token must not; point them at different keys",fieldPath=".registrationToken",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="!has(self.flavour) || self.flavour != 'Host' || !has(self.labels) || self.labels.all(l, !l.matches('^[^:]+:docker(:|$)'))",message="spec.flavour Host runs jobs on the runner pod itself, without Docker: spec.labels must be host labels (\"name\" or \"name:host\"), not \"name:docker://image\"",fieldPath=".labels",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="!has(self.defaultLabels) || self.defaultLabels || (has(self.labels) && size(self.labels) > 0)",message="spec.labels must name at least one label when spec.defaultLabels is false: a runner with no labels would get act_runner's own defaults",fieldPath=".labels",reason=FieldValueRequired
type RunnerGroupSpec struct {
	// Scope says where the runners register in Gitea and so whose jobs they
	// serve: global (the instance), org (spec.org), user (spec.user) or repo
	// (spec.repo, its owner in spec.org or spec.user).
	Scope Scope `json:"scope"`

	// Org names the organization: for scope org, or the repository's owner
	// for scope repo.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][-_.a-zA-Z0-9]*$`
	Org string `json:"org,omitempty"`

	// User names the user: for scope user, or the repository's owner for
	// scope repo.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][-_.a-zA-Z0-9]*$`
	User string `json:"user,omitempty"`

	// Repo names the repository, without its owner, for scope repo.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:Pattern=`^[-_.a-zA-Z0-9]+$`
	// +kubebuilder:validation:XValidation:rule="!self.contains('/')",message="spec.repo is the repository name without its owner: no '/' (put the owner in spec.org or spec.user)"
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="spec.repo must not be '.' or '..'"
	Repo string `json:"repo,omitempty"`

	// Gitea says where the Gitea instance is.
	Gitea GiteaSpec `json:"gitea"`

	// The uniqueness rule (for each name n, exactly one label is n or starts
	// with "n:") maps the names once, which keeps the API server's cost
	// estimate for it low.
	// +listType=set
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:XValidation:rule="self.map(l, l.split(':')[0]).all(n, self.exists_one(m, m == n || m.startsWith(n + ':')))",message="label names in spec.labels (the part before the first ':') must be unique"
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:Pattern=`^[^,\s]+$`
	// +kubebuilder:validation:items:XValidation:rule=`!self.matches('\\p{Cc}')`,message="each of spec.labels must not contain control characters (such as ESC or BEL): why and status print labels to a terminal"
	// +kubebuilder:validation:items:XValidation:rule="self.matches('^[^:]+(:(host|docker(:.+)?))?$')",message=`each of spec.labels is "name", "name:host" or "name:docker://image", with a non-empty name`

	// Labels are the runner's labels, each "name", "name:host" or
	// "name:docker://image"; the scaler's default labels are added, except
	// those whose name a label here already has.
	Labels []string `json:"labels,omitempty"`

	// DefaultLabels, when false, leaves out the scaler's default labels
	// (ubuntu-latest and the like), so a special-purpose group never takes a
	// plain group's jobs. Default true.
	// +optional
	DefaultLabels *bool `json:"defaultLabels,omitempty"`

	// MaxActiveRunners caps the group's unfinished runner Jobs; 0 pauses the
	// group (running ones finish).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	MaxActiveRunners int32 `json:"maxActiveRunners"`

	// Suspend pauses the group as maxActiveRunners 0 does, keeping its cap
	// and warm pool for later. Default false.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// MinIdleRunners is the warm pool: idle runners kept registered beyond
	// the queued jobs, so a job need not wait for a pod. At most
	// maxActiveRunners. Default 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	MinIdleRunners int32 `json:"minIdleRunners,omitempty"`

	// RegistrationToken points at the registration token of the group's
	// scope, in the group's namespace. Left out, the scaler mints it with
	// spec.authToken into the Secret "<name>-registration-token".
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.secretRef.key != '.' && self.secretRef.key != '..' && !self.secretRef.key.startsWith('..')",message="spec.registrationToken.secretRef.key is not a valid Secret key: it must not be '.' or '..' or start with '..'",fieldPath=".secretRef.key"
	RegistrationToken *SecretKeySelector `json:"registrationToken,omitempty"`

	// AuthToken points at a Gitea API token that can list the scope's
	// Actions jobs, in a Secret in the RunnerGroup's namespace.
	// +kubebuilder:validation:XValidation:rule="self.secretRef.key != '.' && self.secretRef.key != '..' && !self.secretRef.key.startsWith('..')",message="spec.authToken.secretRef.key is not a valid Secret key: it must not be '.' or '..' or start with '..'",fieldPath=".secretRef.key"
	AuthToken SecretKeySelector `json:"authToken"`

	// Template is merged over the runner pod the scaler builds, after the
	// chart's runnerTemplate, by the rules of the chart's
	// docs/runner-pods.md; the rules below list what a group may not set.
	// Its field descriptions are left out to keep the CRD small; see
	// kubectl explain pod.spec.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.restartPolicy)",message="spec.template.spec.restartPolicy is reserved: runner Jobs use OnFailure, so that a runner that fails to register starts again",fieldPath=".spec.restartPolicy",reason=FieldValueForbidden
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || ((!has(self.spec.containers) || self.spec.containers.all(c, !has(c.env) || c.env.all(e, e.name != 'GITEA_INSTANCE_URL' && !e.name.startsWith('GITEA_RUNNER_')))) && (!has(self.spec.initContainers) || self.spec.initContainers.all(c, !has(c.env) || c.env.all(e, e.name != 'GITEA_INSTANCE_URL' && !e.name.startsWith('GITEA_RUNNER_')))))",message="spec.template must not set env GITEA_INSTANCE_URL or GITEA_RUNNER_* in any container: the scaler sets them from spec.gitea, spec.registrationToken and spec.labels",fieldPath=".spec",reason=FieldValueForbidden
	// +kubebuilder:validation:XValidation:rule="!has(self.metadata) || !has(self.metadata.labels) || self.metadata.labels.all(k, !k.startsWith('gitea.bpg.pw/') && !(k in ['app.kubernetes.io/name', 'app.kubernetes.io/component', 'app.kubernetes.io/managed-by']))",message="spec.template.metadata.labels must not set gitea.bpg.pw/* or app.kubernetes.io/name, component or managed-by: the scaler finds and counts its runner pods by them",fieldPath=".metadata",reason=FieldValueForbidden
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || (!has(self.spec.serviceAccountName) && !has(self.spec.serviceAccount))",message="spec.template.spec.serviceAccountName is not allowed in a RunnerGroup: runner pods would get the rights of a ServiceAccount their group's author may not hold; the platform team can set it in the chart's runnerTemplate",fieldPath=".spec",reason=FieldValueForbidden
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.volumes) || self.spec.volumes.all(v, !has(v.secret) && (!has(v.projected) || !has(v.projected.sources) || v.projected.sources.all(p, !has(p.secret) && !has(p.serviceAccountToken))))",message="spec.template.spec.volumes must not mount Secrets or ServiceAccount tokens (secret, projected secret or serviceAccountToken): runner pods would read what their group's author may not; the platform team can add them in the chart's runnerTemplate",fieldPath=".spec.volumes",reason=FieldValueForbidden
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || ((!has(self.spec.containers) || self.spec.containers.all(c, (!has(c.env) || c.env.all(e, !has(e.valueFrom) || !has(e.valueFrom.secretKeyRef))) && (!has(c.envFrom) || c.envFrom.all(f, !has(f.secretRef))))) && (!has(self.spec.initContainers) || self.spec.initContainers.all(c, (!has(c.env) || c.env.all(e, !has(e.valueFrom) || !has(e.valueFrom.secretKeyRef))) && (!has(c.envFrom) || c.envFrom.all(f, !has(f.secretRef))))))",message="spec.template must not read Secrets into env (valueFrom.secretKeyRef, envFrom.secretRef): runner pods would read what their group's author may not; the platform team can add them in the chart's runnerTemplate",fieldPath=".spec",reason=FieldValueForbidden
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.volumes) || self.spec.volumes.all(v, !has(v.hostPath) && !has(v.gcePersistentDisk) && !has(v.awsElasticBlockStore) && !has(v.gitRepo) && !has(v.nfs) && !has(v.iscsi) && !has(v.glusterfs) && !has(v.persistentVolumeClaim) && !has(v.rbd) && !has(v.flexVolume) && !has(v.cinder) && !has(v.cephfs) && !has(v.flocker) && !has(v.fc) && !has(v.azureFile) && !has(v.vsphereVolume) && !has(v.quobyte) && !has(v.azureDisk) && !has(v.photonPersistentDisk) && !has(v.portworxVolume) && !has(v.scaleIO) && !has(v.storageos) && !has(v.csi))",message="spec.template.spec.volumes may use only emptyDir, configMap, downwardAPI, projected, ephemeral and image volumes: the other types name a Secret that the kubelet hands to a driver, a host path, or storage that exists apart from the pod; the platform team can add them in the chart's runnerTemplate",fieldPath=".spec.volumes",reason=FieldValueForbidden
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.volumes) || self.spec.volumes.all(v, !has(v.projected) || !has(v.projected.sources) || v.projected.sources.all(p, !has(p.clusterTrustBundle) && !has(p.podCertificate)))",message="spec.template.spec.volumes may project only configMap and downwardAPI sources",fieldPath=".spec.volumes",reason=FieldValueForbidden
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.volumes) || self.spec.volumes.all(v, !has(v.ephemeral) || !has(v.ephemeral.volumeClaimTemplate) || (!has(v.ephemeral.volumeClaimTemplate.spec.dataSource) && !has(v.ephemeral.volumeClaimTemplate.spec.dataSourceRef)))",message="spec.template.spec.volumes must not give an ephemeral volume a dataSource or dataSourceRef: it would copy existing storage into the runner pod",fieldPath=".spec.volumes",reason=FieldValueForbidden
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.containers) || self.spec.containers.all(c, c.name != 'runner' || !has(c.env) || c.env.all(e, e.name != 'CONFIG_FILE'))",message="spec.template must not set env CONFIG_FILE in the runner container: the scaler sets it to the config it renders from spec.runnerConfig; configure the runner there",fieldPath=".spec",reason=FieldValueForbidden
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.automountServiceAccountToken)",message="spec.template.spec.automountServiceAccountToken is reserved: runner pods get no ServiceAccount token (the namespace's default one would reach every runner) unless the platform's runnerTemplate says so",fieldPath=".spec",reason=FieldValueForbidden
	Template *corev1.PodTemplateSpec `json:"template,omitempty"`

	// Flavour is how the runner pod runs its jobs. Privileged: the
	// built-in pod, privileged, with its own Docker daemon, for namespaces
	// whose Pod Security admits privileged pods. UserNamespaced: the same
	// daemon without privilege, in a user namespace of its own (hostUsers
	// false), admitted at baseline; the platform sets it up (the chart's
	// userNamespacedRunners). Host: no Docker daemon, the runner alone as
	// uid 1000, admitted at restricted; jobs run on the runner pod itself,
	// so every label is a host label. Auto (the default): Privileged where
	// the namespace admits it, else UserNamespaced where the platform set
	// it up; never Host, whose jobs differ.
	// +optional
	// +kubebuilder:validation:Enum=Auto;Privileged;UserNamespaced;Host
	Flavour RunnerFlavour `json:"flavour,omitempty"`

	// RunnerConfig is the group's part of the runner's config.yaml, merged
	// over the chart's runnerConfig.defaults and under runnerConfig.pinned
	// (the chart's docs/runner-config.md).
	// +optional
	RunnerConfig *RunnerConfig `json:"runnerConfig,omitempty"`
}

// RunnerFlavour is how a runner pod runs its Docker daemon (spec.flavour).
type RunnerFlavour string

const (
	// FlavourAuto picks Privileged where the namespace's Pod Security
	// admits it, else UserNamespaced where the platform set it up.
	FlavourAuto RunnerFlavour = "Auto"
	// FlavourPrivileged is the built-in pod: a privileged container.
	FlavourPrivileged RunnerFlavour = "Privileged"
	// FlavourUserNamespaced is an unprivileged pod in a user namespace.
	FlavourUserNamespaced RunnerFlavour = "UserNamespaced"
	// FlavourHost is the runner alone, without a Docker daemon: jobs run
	// on the pod itself.
	FlavourHost RunnerFlavour = "Host"
)

// GiteaSpec locates the Gitea instance.
type GiteaSpec struct {
	// URL is the base URL of the Gitea instance, such as
	// https://gitea.example.com: http or https, without credentials, query
	// or fragment.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule=`!self.matches('[\\s]')`,message="spec.gitea.url must not contain whitespace"
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="spec.gitea.url must be an absolute http:// or https:// URL with a host, for example https://gitea.example.com"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[^/?#]*//[^/?#]*@')",message="spec.gitea.url must not contain credentials (user:password@): they would leak into status, events and logs; put tokens in the Secrets that spec.registrationToken and spec.authToken name"
	// +kubebuilder:validation:XValidation:rule="!self.matches('[?#]')",message="spec.gitea.url is a base URL: it must not have a query (?) or a fragment (#)"
	URL string `json:"url"`
}

// SecretKeySelector points at one key of a Secret in the RunnerGroup's
// namespace.
type SecretKeySelector struct {
	// SecretRef names the Secret and the key in it that hold the token.
	SecretRef SecretRef `json:"secretRef"`
}

// SecretRef names a Secret and a key in it.
type SecretRef struct {
	// Name of the Secret, in the RunnerGroup's namespace (a DNS subdomain).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// Key in the Secret whose value is the token: letters, digits, '-', '_'
	// and '.', not '.' or '..' and not starting with '..'.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// RunnerGroupStatus is what the last scaler pass observed.
//
// The scaler always writes every counter, but the schema keeps them optional
// so that a status written by an older scaler, or a partial status patch, is
// still accepted.
type RunnerGroupStatus struct {
	// ActiveRunners counts the group's runner Jobs that have not finished.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ActiveRunners int32 `json:"activeRunners"`

	// QueuedJobs counts queued Gitea jobs whose labels the group can serve.
	// +optional
	// +kubebuilder:validation:Minimum=0
	QueuedJobs int32 `json:"queuedJobs"`

	// BlockedJobs counts matching Gitea jobs that wait for their needs or an
	// approval.
	// +optional
	// +kubebuilder:validation:Minimum=0
	BlockedJobs int32 `json:"blockedJobs"`

	// RunningJobs counts Gitea jobs in progress on this group's runners.
	// +optional
	// +kubebuilder:validation:Minimum=0
	RunningJobs int32 `json:"runningJobs"`

	// JobsLeftToOtherGroups counts queued Gitea jobs this group could run
	// but left to another group that the assignment rule prefers (a more
	// specific scope, fewer labels, or a smaller namespace/name).
	// +optional
	// +kubebuilder:validation:Minimum=0
	JobsLeftToOtherGroups int32 `json:"jobsLeftToOtherGroups"`

	// IdleRunners counts active runner Jobs whose pod runs and whose runner
	// runs no Gitea job.
	// +optional
	// +kubebuilder:validation:Minimum=0
	IdleRunners int32 `json:"idleRunners"`

	// StartingRunners counts active runner Jobs whose pod has not run yet.
	// +optional
	// +kubebuilder:validation:Minimum=0
	StartingRunners int32 `json:"startingRunners"`

	// StuckRunners counts the runner Jobs the last pass deleted because
	// their pod did not start within the runner start timeout.
	// +optional
	// +kubebuilder:validation:Minimum=0
	StuckRunners int32 `json:"stuckRunners"`

	// ReapedRunners counts what the last pass reaped: idle surplus runner
	// Jobs deleted and orphan runner registrations removed from Gitea.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ReapedRunners int32 `json:"reapedRunners"`

	// WarmRunners counts idle runners beyond the queued jobs that the warm
	// pool keeps (at most spec.minIdleRunners): ready for the next job.
	// +optional
	// +kubebuilder:validation:Minimum=0
	WarmRunners int32 `json:"warmRunners"`

	// LastCheckTime is when a pass that changed this status asked Gitea
	// for the group's jobs. A pass that changes nothing writes no status,
	// so it is refreshed on its own only every few minutes (the scaler's
	// status heartbeat, 5m) while the group is served.
	LastCheckTime *metav1.Time `json:"lastCheckTime,omitempty"`

	// ObservedGeneration is the metadata.generation of the spec the last
	// pass acted on.
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are Ready, ScalingActive, RegistrationToken and, with
	// the shared cache, Cache, one of each type at most.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
