package controllers_test

import (
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// managerMetric returns the value of the manager's metric with the given
// labels: a gauge's value or a histogram's count; 0 when there is none.
func managerMetric(name string, labels map[string]string) float64 {
	families, err := crmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m, labels) {
				if h := m.GetHistogram(); h != nil {
					return float64(h.GetSampleCount())
				}
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			n++
		}
	}
	return n == len(want)
}

var _ = Describe("Manager metrics", func() {
	It("times the teardown write-back", func() {
		w := newWorld()
		inst, _, data := readyWithDirtyData(w, "64Mi", 1)
		labels := map[string]string{"namespace": w.ns, "kind": "teardown"}
		Expect(managerMetric("burstcache_manager_flush_duration_seconds", labels)).To(BeZero())

		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(gone(inst), 30*time.Second, 200*time.Millisecond).Should(BeTrue())
		Expect(os.ReadFile(filepath.Join(w.hostPath(w.backing), "results", "out.dat"))).To(Equal(data))
		Expect(managerMetric("burstcache_manager_flush_duration_seconds", labels)).To(BeEquivalentTo(1))
	})
})
