package kubelet

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2" //nolint:staticcheck // a Ginkgo helper, written as the suites that use it
	. "github.com/onsi/gomega"    //nolint:staticcheck // a Ginkgo helper, written as the suites that use it
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SSDLabel marks the nodes RegisterNodes creates as having the local SSDs
// that pools select.
const SSDLabel = "node.burstcache.io/nvme"

// RegisterNodes creates ready nodes with the given names, labelled with
// SSDLabel and their host name, as the nodes' kubelets would register them.
func (k *Kubelet) RegisterNodes(ctx context.Context, names ...string) {
	GinkgoHelper()
	for _, n := range names {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{
			SSDLabel: "true", corev1.LabelHostname: n,
		}}}
		Expect(k.Client.Create(ctx, node)).To(Succeed())
		// The API server taints new nodes not-ready; the node lifecycle
		// controller, which envtest lacks, lifts it once the kubelet reports.
		node.Spec.Taints = nil
		Expect(k.Client.Update(ctx, node)).To(Succeed())
	}
}

// Binary returns a burstcache binary that the pods' users can run: a copy
// of $BURSTCACHE_BIN, or one built from the checkout at root, in a fresh
// directory open to them.
func Binary(root string) string {
	GinkgoHelper()
	dir := GinkgoT().TempDir()
	Expect(os.Chmod(dir, 0o755)).To(Succeed())
	out := filepath.Join(dir, "burstcache")
	src := os.Getenv("BURSTCACHE_BIN")
	if src == "" {
		build := exec.Command("go", "build", "-o", out, "./cmd/burstcache")
		build.Dir = root
		b, err := build.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "building burstcache: %s", b)
		return out
	}
	data, err := os.ReadFile(src)
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(out, data, 0o755)).To(Succeed())
	return out
}
