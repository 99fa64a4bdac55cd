package v1alpha1_test

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/test/repo"
)

var _ = Describe("The samples in config/samples", func() {
	// The samples are listed by config/samples/kustomization.yaml, so a
	// sample that is not listed there is not shipped and a listed file that
	// is missing fails here.
	It("are all accepted by the API server, with no unknown fields", func() {
		root, err := repo.Root()
		Expect(err).NotTo(HaveOccurred())
		dir := filepath.Join(root, "config", "samples")
		var kustomization struct {
			Resources []string `json:"resources"`
		}
		raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(yaml.Unmarshal(raw, &kustomization)).To(Succeed())
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		for _, f := range files {
			if name := filepath.Base(f); name != "kustomization.yaml" {
				Expect(kustomization.Resources).To(ContainElement(name), "sample not listed in kustomization.yaml")
			}
		}

		ns := newNamespace()
		kinds := map[string]int{}
		for _, file := range kustomization.Resources {
			By("creating " + file)
			raw, err := os.ReadFile(filepath.Join(dir, file))
			Expect(err).NotTo(HaveOccurred())
			u := &unstructured.Unstructured{}
			Expect(yaml.Unmarshal(raw, &u.Object)).To(Succeed(), file)
			if u.GetKind() != "StorageClass" {
				Expect(u.GroupVersionKind().GroupVersion()).To(Equal(cachev1alpha1.GroupVersion), file)
			}
			if u.GetKind() == "CacheInstance" {
				u.SetNamespace(ns)
			}
			// Strict: a misspelt field is an error, not silently pruned.
			err = k8sClient.Create(ctx, u, client.FieldValidation(metav1.FieldValidationStrict))
			Expect(err).NotTo(HaveOccurred(), "%s: %v", file, causes(err))
			kinds[u.GetKind()]++
		}
		Expect(kinds).To(HaveKeyWithValue("CachePool", BeNumerically(">=", 2)))
		Expect(kinds).To(HaveKeyWithValue("CacheInstance", BeNumerically(">=", 4)))
	})
})
