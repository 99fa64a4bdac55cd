package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of the types in this package.
var GroupVersion = schema.GroupVersion{Group: "cache.burstcache.io", Version: "v1alpha1"}

var (
	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers the kinds and their lists under GroupVersion, plus
// the meta types (ListOptions and friends) every API group carries.
func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&CachePool{}, &CachePoolList{},
		&CacheInstance{}, &CacheInstanceList{},
	)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
