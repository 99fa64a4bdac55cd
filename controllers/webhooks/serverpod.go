package webhooks

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// +kubebuilder:webhook:path=/validate--v1-pod-server,mutating=false,failurePolicy=ignore,sideEffects=None,groups="",resources=pods;pods/ephemeralcontainers,verbs=create;update,versions=v1,name=vserverpod-v1.cache.burstcache.io,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate--v1-pod-connect,mutating=false,failurePolicy=ignore,sideEffects=None,groups="",resources=pods/exec;pods/attach;pods/portforward;pods/proxy,verbs=connect,versions=v1,name=vserverpodconnect-v1.cache.burstcache.io,admissionReviewVersions=v1

// ServerPodGuard keeps cache server pods as the manager made them. A server
// pod mounts the backing file system, runs as the instance's runAs
// identity (or as root, with capabilities, for a shared instance) and
// holds the instance's secret, in the instance's namespace, where users
// who may edit pods could otherwise run commands in it (exec, attach,
// ephemeral containers), reach its ports through the API server, change
// its image, or label a pod of their own as a server of an instance. Any
// of those would reach the whole backing file system as that identity,
// past the path prefixes the pool grants the namespace, or let a pod of
// theirs answer the mounts in a server's place.
//
// Only the manager's own identity and members of AdminGroups may create a
// pod labelled as a server, change a server pod's spec or the
// cache.burstcache.io labels and annotations it goes by, or connect to
// one. Others may still delete a server pod (the manager makes it anew,
// and its data waits on its disk) and change what burstcache does not go
// by: other labels and annotations, finalizers, owners.
//
// The markers say failurePolicy ignore, which is what the generated
// manifests alone may say, since they would see every pod change and exec
// of the cluster. config/webhook's kustomization, which the chart is made
// from, narrows them to server pods (changes by the server label,
// connections by the names server pods get, as the labels of the pod a
// connection is for are not in its admission request) and makes them fail
// closed: a manager that is down stops changes of and connections to
// server pods, and nothing else.
type ServerPodGuard struct {
	// Reader reads the pod a connection is for.
	Reader client.Reader
	// Manager is the user name the manager acts as.
	Manager string
	// AdminGroups may do to server pods what users may not.
	AdminGroups []string

	decoder admission.Decoder
}

// SetupWithManager registers the webhooks with mgr's webhook server.
func (g *ServerPodGuard) SetupWithManager(mgr ctrl.Manager) error {
	g.decoder = admission.NewDecoder(mgr.GetScheme())
	srv := mgr.GetWebhookServer()
	srv.Register("/validate--v1-pod-server", &webhook.Admission{Handler: admission.HandlerFunc(g.handleChange)})
	srv.Register("/validate--v1-pod-connect", &webhook.Admission{Handler: admission.HandlerFunc(g.handleConnect)})
	return nil
}

// ManagerUserName asks the API server which user the manager's credentials
// authenticate as.
func ManagerUserName(ctx context.Context, c client.Client) (string, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return "", fmt.Errorf("asking the API server who the manager is: %w", err)
	}
	return review.Status.UserInfo.Username, nil
}

// handleChange guards creates and updates of pods, ephemeral containers
// included.
func (g *ServerPodGuard) handleChange(_ context.Context, req admission.Request) admission.Response {
	pod, old := &corev1.Pod{}, &corev1.Pod{}
	if err := g.decoder.Decode(req, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if req.Operation == admissionv1.Update {
		if err := g.decoder.DecodeRaw(req.OldObject, old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
	}
	if !isServerPod(pod) && !isServerPod(old) {
		return admission.Allowed("")
	}
	if g.privileged(req.UserInfo) {
		return admission.Allowed("")
	}
	switch {
	case req.Operation == admissionv1.Create:
		return g.refuse("only the burstcache manager makes pods labelled %s=%s", cachev1alpha1.LabelComponent, cachev1alpha1.ComponentServer)
	case req.SubResource == "ephemeralcontainers":
		return g.refuse("cache server pod %s/%s takes no ephemeral containers", req.Namespace, req.Name)
	case !equality.Semantic.DeepEqual(old.Spec, pod.Spec):
		return g.refuse("the spec of cache server pod %s/%s is the burstcache manager's to change", req.Namespace, req.Name)
	case !maps.Equal(ours(old.Labels), ours(pod.Labels)) || !maps.Equal(ours(old.Annotations), ours(pod.Annotations)):
		return g.refuse("the %s labels and annotations of cache server pod %s/%s are the burstcache manager's to change",
			cachev1alpha1.GroupVersion.Group, req.Namespace, req.Name)
	}
	return admission.Allowed("")
}

// handleConnect guards exec, attach, port forwarding and proxying to pods.
func (g *ServerPodGuard) handleConnect(ctx context.Context, req admission.Request) admission.Response {
	if g.privileged(req.UserInfo) {
		return admission.Allowed("")
	}
	var pod corev1.Pod
	err := g.Reader.Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: req.Name}, &pod)
	if apierrors.IsNotFound(err) {
		return admission.Allowed("")
	}
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("reading pod %s/%s: %w", req.Namespace, req.Name, err))
	}
	if !isServerPod(&pod) {
		return admission.Allowed("")
	}
	return g.refuse("cache server pod %s/%s holds the backing file system as the instance's identity: %s to it is for the groups the manager's --server-pod-admin-groups names",
		req.Namespace, req.Name, req.SubResource)
}

func (g *ServerPodGuard) privileged(u authenticationv1.UserInfo) bool {
	return (g.Manager != "" && u.Username == g.Manager) || slices.ContainsFunc(u.Groups, func(grp string) bool {
		return slices.Contains(g.AdminGroups, grp)
	})
}

func (g *ServerPodGuard) refuse(format string, args ...any) admission.Response {
	return admission.Denied(fmt.Sprintf(format, args...))
}

func isServerPod(pod *corev1.Pod) bool {
	return pod.Labels[cachev1alpha1.LabelComponent] == cachev1alpha1.ComponentServer
}

// ours returns the entries of m whose keys burstcache owns.
func ours(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if strings.HasPrefix(k, cachev1alpha1.GroupVersion.Group+"/") {
			out[k] = v
		}
	}
	return out
}
