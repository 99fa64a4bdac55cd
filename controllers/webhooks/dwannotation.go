package webhooks

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// directiveText returns the DataWarp directives of the pod and the
// annotation they came from. AnnotationDirective is the name users are
// told; AnnotationDirectiveAlias keeps pods written for the earlier name
// working. A pod with both must give the same text in each, so that no
// reader has to guess which one burstcache honoured.
func directiveText(pod *corev1.Pod) (text, key string, err error) {
	cur, hasCur := pod.Annotations[cachev1alpha1.AnnotationDirective]
	old, hasOld := pod.Annotations[cachev1alpha1.AnnotationDirectiveAlias]
	switch {
	case hasCur && hasOld && cur != old:
		return "", cachev1alpha1.AnnotationDirective, fmt.Errorf("differs from annotation %s; give the directives once", cachev1alpha1.AnnotationDirectiveAlias)
	case hasCur:
		return cur, cachev1alpha1.AnnotationDirective, nil
	case hasOld:
		return old, cachev1alpha1.AnnotationDirectiveAlias, nil
	}
	return "", "", nil
}
