// Package v1 is a small API for apidoc's tests.
//
// +groupName=example.com
package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Color is a colour.
// +kubebuilder:validation:Enum=red;blue
type Color string

// A maintainers' note above the markers, not part of the reference.
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=".spec.size",description="How big | how wide."
// +kubebuilder:printcolumn:name="Color",type=string,priority=1,JSONPath=".spec.color"

// Widget is a widget.
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what is wanted.
	Spec WidgetSpec `json:"spec"`
}

// WidgetSpec is what is wanted of a Widget.
//
// A second paragraph explains the code to its readers and stays out of the
// reference.
//
// +kubebuilder:validation:XValidation:rule="self.size > 0 || self.color == 'red'",message="spec.size must be positive unless red"
type WidgetSpec struct {
	// Size of the <widget>, in *units*.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	Size int32 `json:"size"`

	// Detached note for maintainers.
	// +kubebuilder:validation:MaxItems=3
	// +kubebuilder:validation:items:MinLength=1

	// Tags are tags.
	// +optional
	Tags []string `json:"tags"`

	// Color is the colour.
	// +kubebuilder:validation:XValidation:rule="self != 'blue'",message="spec.color blue is out of stock"
	Color *Color `json:"color,omitempty"`

	// Since is when.
	Since *metav1.Time `json:"since,omitempty"`
}

// Unused is reached from nowhere and left out.
type Unused struct{}
