// Package v1alpha1 holds the RunnerGroup API (group gitea.bpg.pw, version
// v1alpha1).
//
// The Go types and their kubebuilder markers are the one source of the
// schema: `make generate` runs controller-gen, which writes the CRD to
// crds/ (and the chart's copy) and the DeepCopy methods to
// zz_generated.deepcopy.go. Edit the types, never the generated files.
//
// Bad objects are refused at admission by the schema (types, enums,
// patterns, bounds) and by CEL rules (XValidation markers) for what a schema
// alone cannot say: which of org, user and repo each scope takes, the shape
// of the URL, unique label names and the length of metadata.name. Every
// bound (MaxLength, MaxItems) is there also so that the API server can
// estimate the cost of the CEL rules and accept them. Validate (validate.go)
// checks again in Go the rules the scaler relies on, for objects admitted
// under an older CRD.
//
// The scaler reads RunnerGroups through the dynamic client and converts them
// into these types, so no generated clientset is needed.
//
// +groupName=gitea.bpg.pw
// +kubebuilder:object:generate=true
package v1alpha1
