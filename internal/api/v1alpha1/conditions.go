package v1alpha1

// The condition types and reasons a RunnerGroup's status and events carry.
// They live with the API types so that anything reading a RunnerGroup (the
// read-only commands, dashboards, tests) can name them without importing
// the engine that writes them.

// Condition types on a RunnerGroup.
const (
	// ConditionReady is True when the last pass served the group without error.
	ConditionReady = "Ready"
	// ConditionScalingActive is False when the group cannot start runners:
	// paused, or at its maxActiveRunners while jobs wait.
	ConditionScalingActive = "ScalingActive"
)

// ConditionRegistrationToken says whether the group's registration token
// is the one its scope's runners register with: True when the scaler
// checked it (or mints it), False when it is another scope's (the group is
// not served), Unknown when the group's API token may not ask Gitea.
const ConditionRegistrationToken = "RegistrationToken"

// ConditionCache says, with the shared cache on (the chart's runnerCache),
// whether the group's runners get it: True when the namespace has the
// cache Secret and its cache server answered the scaler this pass, False
// when either is missing. Without the shared cache the condition is absent.
const ConditionCache = "Cache"

// Condition and event reasons. A failed group's Ready condition and Warning
// event carry the reason of its groupError.
const (
	ReasonReconciled  = "Reconciled"
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonInvalidTemplate: spec.template sets a reserved or pinned
	// field, references a Secret or ServiceAccount, or mounts a volume
	// over the runner's state directory.
	ReasonInvalidTemplate = "InvalidTemplate"
	// ReasonInvalidRunnerConfig: spec.runnerConfig sets a field the
	// scaler owns or the platform pinned, or a value the runner would
	// refuse.
	ReasonInvalidRunnerConfig = "InvalidRunnerConfig"
	// ReasonRunnerConfigNotOwned: a ConfigMap <group>-runner-config
	// exists that the group does not own, so no runner config is written
	// and no runner Job created.
	ReasonRunnerConfigNotOwned = "RunnerConfigNotOwned"
	// ReasonCacheReachable, ReasonCacheSecretMissing and
	// ReasonCacheUnreachable are the Cache condition's (cachecheck.go):
	// the namespace's shared cache server answers; the namespace has no
	// cache Secret, so its runners start with the cache off; the server
	// does not answer the scaler.
	ReasonCacheReachable     = "CacheReachable"
	ReasonCacheSecretMissing = "CacheSecretMissing"
	ReasonCacheUnreachable   = "CacheUnreachable"
	ReasonSecretNotFound     = "SecretNotFound"
	ReasonSecretKeyMissing   = "SecretKeyMissing"
	ReasonGiteaUnauthorized  = "GiteaUnauthorized"
	ReasonGiteaForbidden     = "GiteaForbidden"
	ReasonGiteaNotFound      = "GiteaNotFound"
	// ReasonGiteaVersionUnsupported: Gitea answered 404 for an Actions
	// route and says it is older than gitea.MinVersion.
	ReasonGiteaVersionUnsupported = "GiteaVersionUnsupported"
	// ReasonForgejoNotSupported: an Actions request failed and the server
	// says it is Forgejo (a version with "+gitea-"), whose Actions API the
	// scaler does not read.
	ReasonForgejoNotSupported = "ForgejoNotSupported"
	ReasonGiteaTimeout        = "GiteaTimeout"
	ReasonGiteaBadResponse    = "GiteaBadResponse"
	ReasonGiteaUnavailable    = "GiteaUnavailable"
	ReasonKubernetesError     = "KubernetesError"
	ReasonGroupTimeout        = "GroupTimeout"
	ReasonStateConflict       = "StateConflict"
	ReasonStateNotOwned       = "StateNotOwned"
	// ReasonRegistrationTokenNotOwned: the group has no
	// spec.registrationToken and a Secret <group>-registration-token
	// exists that the group does not own, so none is minted.
	ReasonRegistrationTokenNotOwned = "RegistrationTokenNotOwned"
	ReasonStateRebuilt              = "StateRebuilt"
	ReasonJobCreateFailed           = "RunnerJobCreateFailed"
	ReasonRunnerCreated             = "RunnerJobCreated"
	ReasonScaling                   = "Scaling"
	ReasonPaused                    = "Paused"
	ReasonAtCapacity                = "AtCapacity"
	// ReasonRunnerStartTimeout: a runner Job's pod did not start within
	// the runner start timeout, and the Job was deleted.
	ReasonRunnerStartTimeout = "RunnerStartTimeout"
	// ReasonRunnerEndedWithoutJob: a runner Job completed while its
	// runner's registration was still in Gitea, which removes an ephemeral
	// runner's once it has run a job: the runner never took one.
	ReasonRunnerEndedWithoutJob = "RunnerEndedWithoutJob"
	// ReasonRunnerReaped: an idle surplus runner or an orphan registration
	// was removed.
	ReasonRunnerReaped = "RunnerReaped"
	// ReasonRunnerReapFailed: the lifecycle step could not finish (the
	// runners API refused, a delete failed); the next pass tries again.
	ReasonRunnerReapFailed = "RunnerReapFailed"
	// ReasonNamespaceNotEnabled: the scaler lacks the tenant rights in the
	// group's namespace; nothing but the status is written for the group.
	ReasonNamespaceNotEnabled = "NamespaceNotEnabled"
	// ReasonGiteaURLNotAllowed: spec.gitea.url is not under an allowed
	// Gitea URL (or, with none listed, is a loopback, link-local or
	// metadata address); no request was sent there.
	ReasonGiteaURLNotAllowed = "GiteaURLNotAllowed"
	// ReasonPodSecurityForbidsRunner: the namespace's Pod Security label
	// admits no runner pod flavour the group may have; no Job is created.
	ReasonPodSecurityForbidsRunner = "PodSecurityForbidsRunner"
	// ReasonFlavourNotSetUp: spec.flavour asks for user-namespaced runner
	// pods, which the platform has not set up on this install.
	ReasonFlavourNotSetUp = "FlavourNotSetUp"
	// ReasonNodesLackUserNamespaces: the group's runner pods are
	// user-namespaced, and the nodes report that no runtime of theirs
	// runs such pods.
	ReasonNodesLackUserNamespaces = "NodesLackUserNamespaces"
	// ReasonSecretNotLabelled: a token Secret lacks the label that lets
	// the scaler use it (tenancy.SecretLabel).
	ReasonSecretNotLabelled = "SecretNotLabelled"
	// ReasonSecretKeyNotDeclared: the token Secret's annotations do not
	// declare the key for the use the group makes of it (a registration
	// token reaches the runner pod, an API token goes to Gitea, minting
	// needs the owner's leave; tenancy.TokenKeyRefusal).
	ReasonSecretKeyNotDeclared = "SecretKeyNotDeclared"
	// ReasonNotGranted: the group's Gitea URL, scope, owner or repository
	// is outside what the platform granted its namespace (the namespace's
	// annotations, tenancy.CheckGrant); the group serves nothing and takes
	// no part in the assignment rule.
	ReasonNotGranted = "NotGranted"
	// Reasons of the RegistrationToken condition (regcheck.go):
	// NotForScope, also the Ready reason, says the group's registration
	// token is not its scope's active one, so the group is not served.
	ReasonRegistrationTokenMatchesScope = "RegistrationTokenMatchesScope"
	ReasonRegistrationTokenMinted       = "RegistrationTokenMinted"
	ReasonRegistrationTokenNotForScope  = "RegistrationTokenNotForScope"
	ReasonRegistrationTokenUnchecked    = "RegistrationTokenUnchecked"
)
