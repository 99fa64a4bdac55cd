// Package e2e holds the end-to-end suite (build tag e2e): it runs against
// the cluster of the current kubeconfig, in which `make test-e2e`
// (hack/e2e.sh) has installed the chart, and asserts the state of the world
// through the Kubernetes API.
package e2e
