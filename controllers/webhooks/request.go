package webhooks

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/controllers/hint"
)

// checkRequest refuses a user hint that cannot be run as written, such as
// one whose path leaves the instance, so that the user hears it from the
// API rather than from status. The reconciler checks again, for requests
// written while the webhook was not there. A request that did not change
// is let through, so that an old one never blocks other updates.
func checkRequest(old, inst *cachev1alpha1.CacheInstance) error {
	value, ok := inst.Annotations[cachev1alpha1.AnnotationRequest]
	if !ok || (old != nil && old.Annotations[cachev1alpha1.AnnotationRequest] == value) {
		return nil
	}
	if _, err := hint.Parse(value); err != nil {
		fld := field.NewPath("metadata", "annotations").Key(cachev1alpha1.AnnotationRequest)
		return apierrors.NewInvalid(cachev1alpha1.GroupVersion.WithKind("CacheInstance").GroupKind(), inst.Name,
			field.ErrorList{field.Invalid(fld, value, err.Error())})
	}
	return nil
}

// checkRequestWhileDeleting refuses a new user hint on an instance being
// deleted: hints run only on a live instance, so it would wait for ever,
// and its teardown writes everything back anyway.
func checkRequestWhileDeleting(old, inst *cachev1alpha1.CacheInstance) error {
	value, ok := inst.Annotations[cachev1alpha1.AnnotationRequest]
	if !ok || old.Annotations[cachev1alpha1.AnnotationRequest] == value {
		return nil
	}
	fld := field.NewPath("metadata", "annotations").Key(cachev1alpha1.AnnotationRequest)
	return apierrors.NewInvalid(cachev1alpha1.GroupVersion.WithKind("CacheInstance").GroupKind(), inst.Name,
		field.ErrorList{field.Forbidden(fld, "the instance is being deleted: its teardown writes all dirty data back, and hints are not run")})
}
