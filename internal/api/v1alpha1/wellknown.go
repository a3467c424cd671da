package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Names the scaler writes onto objects and that users, the Helm chart and
// the tests read back. They are part of the product's interface: a runner
// Job found by its label after an upgrade must still be found, so a value
// here changes only with a migration.
const (
	// LabelRunnerGroupName is on every object the scaler creates for a
	// group (runner Jobs, their pods, the state ConfigMap); its value is the
	// group's name, and the scaler lists a group's runner Jobs by it.
	LabelRunnerGroupName = Group + "/runnergroup-name"
	// LabelManagedBy marks objects the scaler made, with value ManagedBy.
	LabelManagedBy = Group + "/managed-by"
	// ManagedBy is the value of LabelManagedBy (and of
	// app.kubernetes.io/managed-by on runner Jobs).
	ManagedBy = "gitea-runner-operator"
	// LabelGiteaJobID is on every runner Job: the ID of the Gitea job it was
	// started for. The scaler rebuilds its claims from it when the state
	// ConfigMap is unreadable. A warm runner, started for no job, carries
	// "0".
	LabelGiteaJobID = Group + "/gitea-job-id"
	// AnnotationRunnerName is on every runner Job: the name its runner
	// registers with in Gitea (GITEA_RUNNER_NAME), which carries a tag of
	// the group's UID so that groups of one name in two namespaces never
	// take each other's runners for their own. Jobs made before it existed
	// registered under the Job's own name.
	AnnotationRunnerName = Group + "/runner-name"
	// AnnotationRunnerScope is on every runner Job: the Gitea URL and
	// target its runner registers in, e.g. "https://gitea.example.com org
	// acme". When the group's spec moves it elsewhere, the Job's runner
	// stays registered where it was, and this says where to look for it.
	// Jobs made before it existed registered where their group is now.
	AnnotationRunnerScope = Group + "/runner-scope"
	// AnnotationRunnerScopeKnown is "true" on a runner Job when the
	// scaler knew where its runner registers: it minted the registration
	// token, or Gitea said whose token it is (a containing scope's token
	// registers the runner in that scope, and runner-scope names it).
	// Otherwise ("false", or absent on a Job made before it existed)
	// runner-scope names the group's place, and the runner may be
	// registered in a scope that contains it: such a runner is never
	// called unregistered for missing from runner-scope's listing.
	AnnotationRunnerScopeKnown = Group + "/runner-scope-known"
	// AnnotationRunnerID is on a runner Job whose runner the scaler
	// registered itself (runnerjob.StateSecret): Gitea's ID of that
	// registration, in the place runner-scope names, known before the
	// pod starts, so that a Job deleted before its runner ran takes its
	// registration with it.
	AnnotationRunnerID = Group + "/runner-id"
	// AnnotationRegistrationTokenChecked is on a minted registration
	// token Secret: when the scaler last asked Gitea for the scope's token
	// (RFC 3339).
	AnnotationRegistrationTokenChecked = Group + "/registration-token-checked"
	// AnnotationDeletedNamespacesSweep is on the registrations mirror:
	// the state the sweep of deleted namespaces last reported, and since
	// when (JSON), for status.
	AnnotationDeletedNamespacesSweep = Group + "/deleted-namespaces-sweep"

	// AnnotationSafeToEvict set to "false" on a runner pod keeps the
	// cluster autoscaler from evicting it in the middle of a CI job.
	AnnotationSafeToEvict = "cluster-autoscaler.kubernetes.io/safe-to-evict"

	// FieldManager names the scaler in managedFields of what it creates and
	// of the status it writes; it is also the Events' source component.
	FieldManager = "gitea-runner-scaler"
	// ReportingController is the Events' reportingController: a name
	// qualified by the API group, as Kubernetes asks.
	ReportingController = Group + "/" + FieldManager
)

// ControllerRef is the owner reference the scaler puts on what it makes for
// the group (runner Jobs, the minted registration-token Secret): the group
// controls them, so Kubernetes deletes them with it.
func (rg *RunnerGroup) ControllerRef() metav1.OwnerReference {
	controller := true
	return metav1.OwnerReference{
		APIVersion: GroupVersion.String(),
		Kind:       Kind,
		Name:       rg.Name,
		UID:        rg.UID,
		Controller: &controller,
	}
}
