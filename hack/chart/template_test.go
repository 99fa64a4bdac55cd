package main

import (
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// chartCase is one set of values and what the rendered chart must hold.
type chartCase struct {
	set         []string
	wantImage   string
	wantPolicy  corev1.PullPolicy
	wantSecrets string // names of imagePullSecrets, as the flags take them
	wantIssuer  string
	wantCSI     bool
	wantExtras  []string // kinds rendered only on request
	wantReplica int64
	wantAdmins  string // groups that may exec into server pods, as the flag takes them
}

func TestTemplate(t *testing.T) {
	for name, tc := range map[string]chartCase{
		"defaults use the locally loaded image and issue their own certificate": {
			wantImage: "burstcache:dev", wantPolicy: corev1.PullIfNotPresent, wantIssuer: "self", wantCSI: true, wantReplica: 1,
			wantAdmins: "system:masters",
		},
		"cert-manager issues the certificate and injects the caBundle": {
			set:       []string{"certManager.enabled=true"},
			wantImage: "burstcache:dev", wantPolicy: corev1.PullIfNotPresent, wantIssuer: "external", wantCSI: true, wantReplica: 1,
			wantExtras: []string{"Certificate", "Issuer"},
		},
		"a registry image, several replicas, no CSI driver": {
			set: []string{"image.repository=registry.example.com/hpc/burstcache", "image.tag=v1.2.3", "image.pullPolicy=Always",
				"manager.replicas=3", "csi.enabled=false", "manager.nodeSelector.role=control", "manager.serverPodAdminGroups={hpc-admins,storage-oncall}"},
			wantImage: "registry.example.com/hpc/burstcache:v1.2.3", wantPolicy: corev1.PullAlways, wantIssuer: "self", wantReplica: 3,
			wantAdmins: "hpc-admins,storage-oncall",
		},
		"a private registry: its secrets and policy reach the pods the manager and the node plugin create": {
			set: []string{"image.repository=registry.example.com/hpc/burstcache", "image.tag=latest", "image.pullPolicy=Never",
				"imagePullSecrets[0].name=regcred", "imagePullSecrets[1].name=mirror"},
			wantImage: "registry.example.com/hpc/burstcache:latest", wantPolicy: corev1.PullNever, wantSecrets: "regcred,mirror",
			wantIssuer: "self", wantCSI: true, wantReplica: 1,
		},
		"examples and monitoring switched on": {
			set: []string{"examples.cachePool.enabled=true", "examples.storageClass.enabled=true", "metrics.serviceMonitor.enabled=true",
				"metrics.podMonitor.enabled=true", "metrics.dashboard.enabled=true", "imagePullSecrets[0].name=regcred"},
			wantImage: "burstcache:dev", wantPolicy: corev1.PullIfNotPresent, wantSecrets: "regcred", wantIssuer: "self", wantCSI: true,
			wantReplica: 1, wantExtras: []string{"CachePool", "StorageClass", "ServiceMonitor", "PodMonitor", "ConfigMap"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			objs := render(t, tc.set...)
			checkCRDs(t, objs)
			mgr := checkManager(t, objs, tc)
			checkWebhooks(t, objs, mgr, tc)
			checkCSI(t, objs, tc)
			checkExtras(t, objs, tc)
			checkNamespaced(t, objs)
		})
	}
}

func checkCRDs(t *testing.T, objs []*unstructured.Unstructured) {
	for _, crd := range []string{"cachepools.cache.burstcache.io", "cacheinstances.cache.burstcache.io"} {
		if find(objs, "CustomResourceDefinition", crd) == nil {
			t.Errorf("CRD %s is missing", crd)
		}
	}
}

func checkManager(t *testing.T, objs []*unstructured.Unstructured, tc chartCase) *appsv1.Deployment {
	u := find(objs, "Deployment", "burstcache-manager")
	if u == nil {
		t.Fatal("no manager Deployment")
	}
	d := &appsv1.Deployment{}
	convert(t, u, d)
	if d.Spec.Replicas == nil || int64(*d.Spec.Replicas) != tc.wantReplica {
		t.Errorf("manager replicas = %v, want %d", d.Spec.Replicas, tc.wantReplica)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != tc.wantImage || c.ImagePullPolicy != tc.wantPolicy {
		t.Errorf("manager image %s (%s), want %s (%s)", c.Image, c.ImagePullPolicy, tc.wantImage, tc.wantPolicy)
	}
	if tc.wantAdmins == "" {
		tc.wantAdmins = "system:masters"
	}
	for _, arg := range append(pullArgs("--server-image", tc), "--server-image="+tc.wantImage, "--webhook-cert-issuer="+tc.wantIssuer,
		"--server-pod-admin-groups="+tc.wantAdmins) {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("manager args %v lack %s", c.Args, arg)
		}
	}
	checkRestricted(t, "manager", d.Spec.Template.ObjectMeta, d.Spec.Template.Spec)
	checkPullSecrets(t, "manager", d.Spec.Template.Spec, tc)
	return d
}

// pullArgs are the flags that hand the chart's pull policy and secrets on to
// the pods that the manager (image "--server-image") or the node plugin
// (image "--mount-image") create.
func pullArgs(image string, tc chartCase) []string {
	return []string{image + "-pull-policy=" + string(tc.wantPolicy), image + "-pull-secrets=" + tc.wantSecrets}
}

func checkPullSecrets(t *testing.T, what string, spec corev1.PodSpec, tc chartCase) {
	t.Helper()
	var names []string
	for _, s := range spec.ImagePullSecrets {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != tc.wantSecrets {
		t.Errorf("%s imagePullSecrets = %q, want %q", what, got, tc.wantSecrets)
	}
}

// checkRestricted evaluates a pod template with the Pod Security Admission
// library itself, at the restricted level of the newest version, and also
// asks for a read-only root file system, which burstcache requires beyond it.
func checkRestricted(t *testing.T, what string, meta metav1ObjectMeta, spec corev1.PodSpec) {
	t.Helper()
	ev, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	lv := psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	res := policy.AggregateCheckResults(ev.EvaluatePod(lv, &meta, &spec))
	if !res.Allowed {
		t.Errorf("%s does not meet PodSecurity restricted: %s: %s", what, res.ForbiddenReason(), res.ForbiddenDetail())
	}
	for _, c := range append(spec.InitContainers, spec.Containers...) {
		if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
			t.Errorf("%s container %s has a writable root file system", what, c.Name)
		}
	}
}

func checkWebhooks(t *testing.T, objs []*unstructured.Unstructured, mgr *appsv1.Deployment, tc chartCase) {
	svcU := find(objs, "Service", "burstcache-webhook-service")
	if svcU == nil {
		t.Fatal("no webhook Service")
	}
	svc := &corev1.Service{}
	convert(t, svcU, svc)
	if !selects(svc.Spec.Selector, mgr.Spec.Template.Labels) {
		t.Errorf("webhook Service selector %v does not select the manager pods %v", svc.Spec.Selector, mgr.Spec.Template.Labels)
	}
	if tp := svc.Spec.Ports[0].TargetPort.String(); !hasPort(mgr.Spec.Template.Spec.Containers[0], tp) {
		t.Errorf("webhook Service targets port %s, which the manager does not expose", tp)
	}
	var refs []*admissionregistrationv1.ServiceReference
	var annotations []map[string]string
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	convert(t, find(objs, "MutatingWebhookConfiguration", "burstcache-mutating-webhook-configuration"), m)
	for _, w := range m.Webhooks {
		refs = append(refs, w.ClientConfig.Service)
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	convert(t, find(objs, "ValidatingWebhookConfiguration", "burstcache-validating-webhook-configuration"), v)
	for _, w := range v.Webhooks {
		refs = append(refs, w.ClientConfig.Service)
	}
	if len(refs) < 2 {
		t.Fatalf("%d webhooks, want both configurations filled", len(refs))
	}
	for _, r := range refs {
		if r == nil || r.Name != svc.Name || r.Namespace != releaseNS || r.Path == nil {
			t.Errorf("webhook points at %+v, want Service %s/%s with a path", r, releaseNS, svc.Name)
		}
	}
	annotations = append(annotations, m.Annotations, v.Annotations)
	checkCertSource(t, objs, mgr, annotations, tc)
}

// checkCertSource: with cert-manager, the Certificate fills the Secret the
// manager reads and both configurations ask for its CA; without, nothing
// asks cert-manager for anything and the manager has the RBAC to issue.
func checkCertSource(t *testing.T, objs []*unstructured.Unstructured, mgr *appsv1.Deployment, annotations []map[string]string, tc chartCase) {
	secretArg := argValue(mgr.Spec.Template.Spec.Containers[0].Args, "--webhook-cert-secret")
	if secretArg == "" {
		t.Fatal("manager has no --webhook-cert-secret")
	}
	cert := find(objs, "Certificate", "")
	for _, a := range annotations {
		inject := a["cert-manager.io/inject-ca-from"]
		switch {
		case tc.wantIssuer == "external" && (cert == nil || inject != releaseNS+"/"+cert.GetName()):
			t.Errorf("inject-ca-from = %q, want the chart's Certificate", inject)
		case tc.wantIssuer == "self" && inject != "":
			t.Errorf("inject-ca-from = %q without cert-manager", inject)
		}
	}
	if cert != nil {
		name, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
		dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		if name != secretArg || !slices.Contains(dns, "burstcache-webhook-service."+releaseNS+".svc") {
			t.Errorf("Certificate writes %s for %v, want %s for the webhook Service", name, dns, secretArg)
		}
	}
	role := find(objs, "Role", "burstcache-webhook-cert")
	if role == nil || !strings.Contains(yamlOf(t, role), secretArg) {
		t.Errorf("the manager may not read its certificate Secret %s", secretArg)
	}
}

func checkCSI(t *testing.T, objs []*unstructured.Unstructured, tc chartCase) {
	ds := find(objs, "DaemonSet", "burstcache-csi-node")
	driver := find(objs, "CSIDriver", "csi.burstcache.io")
	if !tc.wantCSI {
		for _, o := range objs {
			if o.GetKind() == "CSIDriver" || strings.Contains(o.GetName(), "csi-node") {
				t.Errorf("csi.enabled=false still renders %s %s", o.GetKind(), o.GetName())
			}
		}
		return
	}
	if ds == nil || driver == nil {
		t.Fatalf("DaemonSet %v, CSIDriver %v: want both", ds != nil, driver != nil)
	}
	d := &appsv1.DaemonSet{}
	convert(t, ds, d)
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != tc.wantImage || c.ImagePullPolicy != tc.wantPolicy || !slices.Contains(c.Args, "--mount-image="+tc.wantImage) {
		t.Errorf("CSI node image %s (%s) args %v, want %s (%s) for itself and its mount pods", c.Image, c.ImagePullPolicy, c.Args, tc.wantImage, tc.wantPolicy)
	}
	for _, arg := range pullArgs("--mount-image", tc) {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("CSI node args %v lack %s, for its mount pods", c.Args, arg)
		}
	}
	checkPullSecrets(t, "CSI node", d.Spec.Template.Spec, tc)
	checkCSINodePrivileges(t, d.Spec.Template.Spec)
}

// checkCSINodePrivileges holds the node plugin to exactly the privileges
// config/csi/node.yaml documents, so none is added unnoticed.
func checkCSINodePrivileges(t *testing.T, spec corev1.PodSpec) {
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Error("the CSI node plugin shares a host namespace")
	}
	var hostPaths []string
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hostPaths = append(hostPaths, v.HostPath.Path)
		}
	}
	slices.Sort(hostPaths)
	want := []string{"/var/lib/kubelet/plugins", "/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/pods"}
	if !slices.Equal(hostPaths, want) {
		t.Errorf("CSI node host paths = %v, want %v", hostPaths, want)
	}
	sc := spec.Containers[0].SecurityContext
	if sc == nil || sc.Capabilities != nil && len(sc.Capabilities.Add) > 0 || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("CSI node security context %+v: want privileged only, no added capabilities, read-only root", sc)
	}
}

func checkExtras(t *testing.T, objs []*unstructured.Unstructured, tc chartCase) {
	for _, kind := range []string{"Certificate", "Issuer", "CachePool", "StorageClass", "ServiceMonitor", "PodMonitor", "ConfigMap"} {
		if got, want := count(objs, kind) > 0, slices.Contains(tc.wantExtras, kind); got != want {
			t.Errorf("%s rendered: %v, want %v", kind, got, want)
		}
	}
	if sc := find(objs, "StorageClass", ""); sc != nil && sc.Object["provisioner"] != "csi.burstcache.io" {
		t.Errorf("example StorageClass provisioner = %v", sc.Object["provisioner"])
	}
	if sm := find(objs, "ServiceMonitor", ""); sm != nil {
		checkServiceMonitor(t, objs, sm)
	}
	if pm := find(objs, "PodMonitor", ""); pm != nil {
		checkPodMonitor(t, pm)
	}
	if cm := find(objs, "ConfigMap", ""); cm != nil {
		checkDashboard(t, cm)
	}
}

// checkNamespaced: every namespaced object lands in the release namespace.
func checkNamespaced(t *testing.T, objs []*unstructured.Unstructured) {
	clusterScoped := []string{"CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "CSIDriver",
		"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "CachePool", "StorageClass",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
	for _, o := range objs {
		if !slices.Contains(clusterScoped, o.GetKind()) && o.GetNamespace() != releaseNS {
			t.Errorf("%s %s is in namespace %q, want %s", o.GetKind(), o.GetName(), o.GetNamespace(), releaseNS)
		}
	}
}

func convert(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if u == nil {
		t.Fatalf("no object to read as %T", into)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		t.Fatalf("reading %s %s: %v", u.GetKind(), u.GetName(), err)
	}
}
