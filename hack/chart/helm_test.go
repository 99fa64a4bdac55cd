package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// The chart tests run the real helm (hack/tool.sh helm, or $HELM) against
// charts/burstcache as committed.

const (
	chartDir    = "../../charts/burstcache"
	releaseNS   = "bc-test"
	releaseName = "bc"
	// kubeVersion is the cluster version helm renders for: a helm built
	// with go install assumes v1.20, older than the chart allows.
	kubeVersion = "1.36.3"
)

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

func helm(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		if helmPath = os.Getenv("HELM"); helmPath != "" {
			return
		}
		var out []byte
		out, helmErr = exec.Command("../tool.sh", "helm").Output()
		helmPath = strings.TrimSpace(string(out))
	})
	if helmErr != nil {
		t.Fatalf("installing helm with hack/tool.sh: %v", helmErr)
	}
	return helmPath
}

// render runs helm template with the given --set values and returns the
// objects, CRDs included.
func render(t *testing.T, set ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", releaseName, chartDir, "--namespace", releaseNS, "--include-crds", "--kube-version", kubeVersion}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(helm(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var objs []*unstructured.Unstructured
	for _, doc := range docSeparator.Split(string(out), -1) {
		m := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("helm template printed invalid YAML: %v\n%s", err, doc)
		}
		if len(m) > 0 {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
	return objs
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			return o
		}
	}
	return nil
}

func count(objs []*unstructured.Unstructured, kind string) int {
	n := 0
	for _, o := range objs {
		if o.GetKind() == kind {
			n++
		}
	}
	return n
}

func TestHelmLint(t *testing.T) {
	for name, set := range map[string][]string{
		"defaults": nil,
		"everything on": {"certManager.enabled=true", "metrics.serviceMonitor.enabled=true", "metrics.podMonitor.enabled=true",
			"metrics.dashboard.enabled=true", "examples.cachePool.enabled=true", "examples.storageClass.enabled=true"},
	} {
		t.Run(name, func(t *testing.T) {
			args := []string{"lint", chartDir, "--strict", "--namespace", releaseNS, "--kube-version", kubeVersion}
			for _, s := range set {
				args = append(args, "--set", s)
			}
			if out, err := exec.Command(helm(t), args...).CombinedOutput(); err != nil {
				t.Fatalf("helm lint: %v\n%s", err, out)
			}
		})
	}
}

func TestChartIsGeneratedFromConfig(t *testing.T) {
	kubectl, err := exec.Command("../k8s-binaries.sh", "kubectl").Output()
	if err != nil {
		t.Fatalf("building kubectl: %v", err)
	}
	raw, err := exec.Command(filepath.Join(strings.TrimSpace(string(kubectl)), "kubectl"), "kustomize", "../../config/default").Output()
	if err != nil {
		t.Fatalf("kustomize build config/default: %v", err)
	}
	files, err := generate(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := copyFiles("../../config", files); err != nil {
		t.Fatal(err)
	}
	for path, want := range files {
		got, err := os.ReadFile(filepath.Join(chartDir, path))
		if err != nil || !bytes.Equal(got, bytes.TrimLeft(want, "\n")) {
			t.Errorf("charts/burstcache/%s is stale or missing (%v): run make chart", path, err)
		}
	}
}
