package policy

import (
	"sort"

	"github.com/go-logr/logr"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// NodeMatches reports whether a node can run the pool's cache servers: it
// has the pool's node selector labels, is not cordoned, and every taint
// that keeps pods off it (NoSchedule, NoExecute) is tolerated by the pool.
func NodeMatches(pool *cachev1alpha1.CachePool, node *corev1.Node) bool {
	if node.Spec.Unschedulable {
		return false
	}
	var p cachev1alpha1.NodePlacement
	if pool.Spec.Nodes != nil {
		p = *pool.Spec.Nodes
	}
	if !labels.SelectorFromSet(p.NodeSelector).Matches(labels.Set(node.Labels)) {
		return false
	}
	for i := range node.Spec.Taints {
		if !tolerated(&node.Spec.Taints[i], p.Tolerations) {
			return false
		}
	}
	return true
}

func tolerated(taint *corev1.Taint, tolerations []corev1.Toleration) bool {
	if taint.Effect == corev1.TaintEffectPreferNoSchedule {
		return true
	}
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(logr.Discard(), taint, false) {
			return true
		}
	}
	return false
}

// MatchingNodes returns the sorted names of the nodes that match the pool.
func MatchingNodes(pool *cachev1alpha1.CachePool, nodes []corev1.Node) []string {
	var out []string
	for i := range nodes {
		if NodeMatches(pool, &nodes[i]) {
			out = append(out, nodes[i].Name)
		}
	}
	sort.Strings(out)
	return out
}
