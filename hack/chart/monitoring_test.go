package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// checkServiceMonitor: the manager's monitor scrapes the metrics Service
// and keeps the namespace label of the manager's own metrics.
func checkServiceMonitor(t *testing.T, objs []*unstructured.Unstructured, sm *unstructured.Unstructured) {
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	svc := find(objs, "Service", "burstcache-manager-metrics")
	if svc == nil || !selects(sel, svc.GetLabels()) {
		t.Errorf("ServiceMonitor selector %v matches no metrics Service", sel)
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 || endpoints[0].(map[string]any)["honorLabels"] != true {
		t.Errorf("ServiceMonitor endpoints %v: want one that honors the manager's namespace label", endpoints)
	}
}

// checkPodMonitor: the servers' monitor selects server pods in every
// namespace by the label the manager gives them, scrapes their control
// port, and labels targets with the instance's name from the pod's label.
func checkPodMonitor(t *testing.T, pm *unstructured.Unstructured) {
	sel, _, _ := unstructured.NestedStringMap(pm.Object, "spec", "selector", "matchLabels")
	server := map[string]string{cachev1alpha1.LabelComponent: cachev1alpha1.ComponentServer, cachev1alpha1.LabelInstance: "run-1", cachev1alpha1.LabelPool: "p"}
	if !selects(sel, server) {
		t.Errorf("PodMonitor selector %v does not select server pods %v", sel, server)
	}
	if everywhere, _, _ := unstructured.NestedBool(pm.Object, "spec", "namespaceSelector", "any"); !everywhere {
		t.Error("PodMonitor does not look for servers in every namespace")
	}
	endpoints, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	if len(endpoints) != 1 {
		t.Fatalf("PodMonitor has %d endpoints, want 1", len(endpoints))
	}
	ep := endpoints[0].(map[string]any)
	// "control" is the name of the servers' control port, which serves /metrics.
	if ep["port"] != "control" || ep["path"] != "/metrics" || ep["honorLabels"] == true {
		t.Errorf("PodMonitor endpoint %v: want the control port's /metrics, without honoring the servers' labels", ep)
	}
	instanceLabel := "__meta_kubernetes_pod_label_" + strings.NewReplacer(".", "_", "/", "_", "-", "_").Replace(cachev1alpha1.LabelInstance)
	if !relabels(ep["relabelings"], instanceLabel, "instance") || !relabels(ep["relabelings"], "", "job") {
		t.Errorf("PodMonitor relabelings %v: want instance from %s and a fixed job", ep["relabelings"], instanceLabel)
	}
}

// relabels says whether rules hold a replace of target from source (or of a
// constant, when source is empty).
func relabels(rules any, source, target string) bool {
	list, _ := rules.([]any)
	for _, r := range list {
		m, _ := r.(map[string]any)
		src, _ := m["sourceLabels"].([]any)
		if m["targetLabel"] == target && (source == "" && len(src) == 0 || len(src) == 1 && src[0] == source) {
			return true
		}
	}
	return false
}

// checkDashboard: the ConfigMap carries the Grafana sidecar's label and the
// dashboard of config/monitoring, byte for byte.
func checkDashboard(t *testing.T, cm *unstructured.Unstructured) {
	if cm.GetName() != "burstcache-dashboard" || cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("ConfigMap %s labels %v: want the dashboard with grafana_dashboard: \"1\"", cm.GetName(), cm.GetLabels())
	}
	got, _, _ := unstructured.NestedString(cm.Object, "data", "burstcache-instance.json")
	want, err := os.ReadFile("../../config/monitoring/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if got != string(bytes.TrimRight(want, "\n")) {
		t.Error("the dashboard ConfigMap differs from config/monitoring/grafana-dashboard.json: run make chart")
	}
	var dash struct {
		UID    string
		Panels []json.RawMessage
	}
	if err := json.Unmarshal([]byte(got), &dash); err != nil || dash.UID == "" || len(dash.Panels) == 0 {
		t.Errorf("the dashboard is not a Grafana dashboard with panels (uid %q, %d panels): %v", dash.UID, len(dash.Panels), err)
	}
}
