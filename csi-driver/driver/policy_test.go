package driver

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/burstcache/burstcache/test/apiserver"
)

// pluginUser is the user of the node plugin's ServiceAccount as the chart
// names it.
const pluginUser = "system:serviceaccount:burstcache-system:burstcache-csi-node"

// TestNodePluginIsHeldToItsNode installs the admission policy the chart
// installs and acts as the node plugin's ServiceAccount, whose tokens name
// the node of the plugin's pod. RBAC lets the plugin write any Lease and
// make pods in its namespace; the policy must keep each plugin to mount
// Leases its node holds and mount pods pinned to its node, so that a token
// taken from one node can neither run privileged pods on another nor let a
// teardown go on by removing another node's mount Lease.
func TestNodePluginIsHeldToItsNode(t *testing.T) {
	env, cfg, err := apiserver.Start(apiserver.Options{Policies: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := t.Context()
	admin, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"team-a", "burstcache-system"} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	// RBAC as wide as the chart's or wider: what is refused below is the
	// policy's doing.
	if err := admin.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "plugin-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "burstcache-csi-node", Namespace: "burstcache-system"}},
	}); err != nil {
		t.Fatal(err)
	}
	pluginOn := func(node string) client.Client {
		c := rest.CopyConfig(cfg)
		c.Impersonate = rest.ImpersonationConfig{UserName: pluginUser, Groups: []string{"system:serviceaccounts", "system:authenticated"}}
		if node != "" {
			c.Impersonate.Extra = map[string][]string{"authentication.kubernetes.io/node-name": {node}}
		}
		cl, err := client.New(c, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	refused := func(what string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want it refused (%q)", what, err, want)
		}
	}
	// The API server takes a new policy up within a second or so.
	probe := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "probe.mount.node-b"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-b")},
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		err := pluginOn("node-a").Create(ctx, probe.DeepCopy(), client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the policy was not in force after 30 s: a create for another node got %v", err)
		}
	}
	a, b := &nodeServer{opts: Options{Client: pluginOn("node-a"), NodeName: "node-a"}}, &nodeServer{opts: Options{Client: pluginOn("node-b"), NodeName: "node-b"}}

	// Its own node's mount Lease: made, changed and removed.
	if err := a.putLease(ctx, "team-a", "scratch", []string{"job-0"}); err != nil {
		t.Fatalf("the plugin of node-a writing its mount Lease: %v", err)
	}
	if err := a.putLease(ctx, "team-a", "scratch", []string{"job-0", "job-1"}); err != nil {
		t.Fatalf("the plugin of node-a updating its mount Lease: %v", err)
	}
	if err := b.putLease(ctx, "team-a", "scratch", []string{"job-2"}); err != nil {
		t.Fatalf("the plugin of node-b writing its mount Lease: %v", err)
	}

	// Another node's: neither written in its name nor removed.
	spoofed := &nodeServer{opts: Options{Client: pluginOn("node-a"), NodeName: "node-b"}}
	refused("the plugin of node-a writing node-b's mount Lease", spoofed.putLease(ctx, "team-a", "scratch", nil), "may only make, change and remove mount Leases its node holds")
	refused("the plugin of node-a removing node-b's mount Lease", spoofed.deleteLease(ctx, "team-a", "scratch"), "may only make, change and remove mount Leases its node holds")
	refused("the plugin of node-a making a mount Lease for node-b", spoofed.putLease(ctx, "team-a", "other", nil), "may only make, change and remove mount Leases its node holds")
	stolen := &coordinationv1.Lease{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "scratch.mount.node-b"}, stolen); err != nil {
		t.Fatal(err)
	}
	stolen.Spec.HolderIdentity = ptr.To("node-a")
	refused("the plugin of node-a taking node-b's mount Lease over", a.opts.Client.Update(ctx, stolen), "may only make, change and remove mount Leases its node holds")
	// Leases that are not mount Leases: not even in its own node's name.
	refused("the plugin of node-a making a leader election Lease", a.opts.Client.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "kube-scheduler"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-a")},
	}), "may only write mount Leases")
	if err := a.deleteLease(ctx, "team-a", "scratch"); err != nil {
		t.Fatalf("the plugin of node-a removing its mount Lease: %v", err)
	}

	// Mount pods: pinned to its node only.
	pod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "burstcache-system"},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "mount", Image: "burstcache"}}},
		}
	}
	if err := a.opts.Client.Create(ctx, pod("mount-a", "node-a")); err != nil {
		t.Fatalf("the plugin of node-a making a mount pod on node-a: %v", err)
	}
	refused("the plugin of node-a making a pod on node-b", a.opts.Client.Create(ctx, pod("mount-b", "node-b")), "may only make, change and remove mount pods pinned to its node")
	refused("the plugin of node-a making a pod the scheduler places", a.opts.Client.Create(ctx, pod("anywhere", "")), "may only make, change and remove mount pods pinned to its node")
	if err := admin.Create(ctx, pod("mount-b", "node-b")); err != nil {
		t.Fatal(err)
	}
	refused("the plugin of node-a removing node-b's mount pod", a.opts.Client.Delete(ctx, pod("mount-b", "")), "may only make, change and remove mount pods pinned to its node")
	if err := a.opts.Client.Delete(ctx, pod("mount-a", "")); err != nil {
		t.Fatalf("the plugin of node-a removing its mount pod: %v", err)
	}

	// A token of the plugin's ServiceAccount that names no node does nothing.
	unbound := &nodeServer{opts: Options{Client: pluginOn(""), NodeName: "node-a"}}
	refused("a token that names no node writing a mount Lease", unbound.putLease(ctx, "team-a", "scratch", nil), "names no node")

	// Others, admins and the manager among them, are not held.
	if err := admin.Create(ctx, pod("placed", "")); err != nil {
		t.Errorf("an admin making a pod the scheduler places: %v", err)
	}
}
