package apiserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/burstcache/burstcache/test/repo"
)

// Options say what Start installs in the new apiserver.
type Options struct {
	// CRDs installs the CustomResourceDefinitions of config/crd/bases.
	CRDs bool
	// Webhooks installs the admission webhook configurations of
	// config/webhook, pointing at the local address in the environment's
	// WebhookInstallOptions, where the caller serves them.
	Webhooks bool
	// Policies installs the ValidatingAdmissionPolicies, and their
	// bindings, that config/default makes.
	Policies bool
	// Assets is the directory holding kube-apiserver and etcd; empty means
	// the one Assets finds.
	Assets string
}

// Start starts etcd and kube-apiserver with what o asks for installed, and
// returns the environment, which the caller must Stop, and a configuration
// for clients of the apiserver. The environment's BinaryAssetsDirectory
// says where the binaries came from, for callers that run more of them.
func Start(o Options) (*envtest.Environment, *rest.Config, error) {
	env, err := newEnvironment(o)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := env.Start()
	if err != nil {
		// Etcd or the apiserver may be running when a later step (installing
		// the CRDs) failed; they must not outlive the caller.
		return nil, nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w",
			env.BinaryAssetsDirectory, errors.Join(err, env.Stop()))
	}
	if o.Policies {
		if err := installPolicies(cfg, env.BinaryAssetsDirectory); err != nil {
			return nil, nil, errors.Join(err, env.Stop())
		}
	}
	return env, cfg, nil
}

// installPolicies creates the admission policies of config/default.
func installPolicies(cfg *rest.Config, assets string) error {
	root, err := repo.Root()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	api := cs.AdmissionregistrationV1()
	ctx := context.Background()
	return kustomize(assets, filepath.Join(root, "config", "default"), func(u *unstructured.Unstructured) error {
		switch u.GetKind() {
		case "ValidatingAdmissionPolicy":
			var p admissionregistrationv1.ValidatingAdmissionPolicy
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
				return err
			}
			p.Namespace = ""
			_, err := api.ValidatingAdmissionPolicies().Create(ctx, &p, metav1.CreateOptions{})
			return err
		case "ValidatingAdmissionPolicyBinding":
			var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &b); err != nil {
				return err
			}
			b.Namespace = ""
			_, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, &b, metav1.CreateOptions{})
			return err
		}
		return nil
	})
}

func newEnvironment(o Options) (*envtest.Environment, error) {
	root, err := repo.Root()
	if err != nil {
		return nil, err
	}
	assets := o.Assets
	if assets == "" {
		if assets, err = Assets(root); err != nil {
			return nil, err
		}
	}
	// envtest reads KUBEBUILDER_ASSETS before BinaryAssetsDirectory, so a
	// stale value must not win over the directory chosen here.
	if err := os.Setenv("KUBEBUILDER_ASSETS", assets); err != nil {
		return nil, fmt.Errorf("setting KUBEBUILDER_ASSETS: %w", err)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	if o.CRDs {
		env.CRDDirectoryPaths = []string{filepath.Join(root, "config", "crd", "bases")}
		env.ErrorIfCRDPathMissing = true
	}
	if o.Webhooks {
		if err := installWebhooks(&env.WebhookInstallOptions, assets, filepath.Join(root, "config", "webhook")); err != nil {
			return nil, err
		}
	}
	return env, nil
}

// installWebhooks puts in o the webhook configurations that kustomize makes
// of dir, as the chart has them: its patches (failure policies, selectors)
// change what the generated manifests say.
func installWebhooks(o *envtest.WebhookInstallOptions, assets, dir string) error {
	return kustomize(assets, dir, func(u *unstructured.Unstructured) error {
		switch u.GetKind() {
		case "MutatingWebhookConfiguration":
			var c admissionregistrationv1.MutatingWebhookConfiguration
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c); err != nil {
				return err
			}
			o.MutatingWebhooks = append(o.MutatingWebhooks, &c)
		case "ValidatingWebhookConfiguration":
			var c admissionregistrationv1.ValidatingWebhookConfiguration
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c); err != nil {
				return err
			}
			o.ValidatingWebhooks = append(o.ValidatingWebhooks, &c)
		}
		return nil
	})
}

// kustomize passes each object that kustomize makes of dir to each. The
// kubectl of assets runs kustomize.
func kustomize(assets, dir string, each func(*unstructured.Unstructured) error) error {
	var stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(assets, "kubectl"), "kustomize", dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("kubectl kustomize %s: %w: %s", dir, err, strings.TrimSpace(stderr.String()))
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("reading what kustomize makes of %s: %w", dir, err)
		}
		if err := each(&u); err != nil {
			return fmt.Errorf("%s %s of %s: %w", u.GetKind(), u.GetName(), dir, err)
		}
	}
}

// Assets returns the directory holding kube-apiserver and etcd:
// KUBEBUILDER_ASSETS if it has them, else bin/k8s below root. It fails, with
// directions, when neither has them.
func Assets(root string) (string, error) {
	var tried []string
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		tried = append(tried, dir)
	}
	tried = append(tried, filepath.Join(root, "bin", "k8s"))
	for _, dir := range tried {
		if fi, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err == nil && !fi.IsDir() {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no kube-apiserver in %s: run `make envtest` to build kube-apiserver and etcd",
		strings.Join(tried, " or "))
}
