package mounter

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// The pod mounter runs only on a real cluster (the e2e suite); this checks
// the pod it asks for.
func TestBuildPod(t *testing.T) {
	p := &Pod{Namespace: "burstcache-system", Image: "burstcache:v1", KubeletDir: "/var/lib/kubelet", GracePeriod: 3 * time.Minute,
		PullPolicy: corev1.PullNever, PullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}}}
	s := Spec{
		Namespace: "team-a", Instance: "train", Node: "node-1",
		Target:  "/var/lib/kubelet/plugins/kubernetes.io/csi/csi.burstcache.io/abc/globalmount",
		Dir:     "/var/lib/kubelet/plugins/csi.burstcache.io/state/volumes/team-a_train",
		Servers: []string{"10.0.0.1:7070", "10.0.0.2:7070"}, ExtentSize: 1 << 20, LoadBalanced: true, ClientCache: true,
		PerCaller: true,
	}
	pod := p.BuildPod(s)
	c := pod.Spec.Containers[0]

	checks := map[string]bool{
		"pinned to the node":           pod.Spec.NodeName == "node-1",
		"in the plugin's namespace":    pod.Namespace == "burstcache-system",
		"never restarted in place":     pod.Spec.RestartPolicy == corev1.RestartPolicyNever,
		"privileged, for /dev/fuse":    c.SecurityContext != nil && *c.SecurityContext.Privileged,
		"sees callers' pids":           pod.Spec.HostPID,
		"no service account token":     !*pod.Spec.AutomountServiceAccountToken,
		"grace period for publishing":  *pod.Spec.TerminationGracePeriodSeconds == 180,
		"image entrypoint is the tool": len(c.Command) == 0 && c.Image == "burstcache:v1",
		"image pulled as the plugin's": c.ImagePullPolicy == corev1.PullNever &&
			slices.Equal(pod.Spec.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "regcred"}}),
		"runs mount at the target":     c.Args[0] == "mount" && c.Args[len(c.Args)-1] == s.Target,
		"secret passed as a host file": slices.Contains(c.Args, s.Dir+"/secret"),
		"load-balanced picks by node":  strings.Contains(strings.Join(c.Args, " "), "--load-balanced --node node-1"),
		"client cache as asked":        slices.Contains(c.Args, "--client-cache"),
		"checks walks per caller":      slices.Contains(c.Args, "--per-caller"),
		"servers in index order":       slices.Contains(c.Args, "10.0.0.1:7070,10.0.0.2:7070"),
		"exit recorded for the plugin": slices.Contains(c.Args, s.Dir+"/exit.json"),
		"one name per instance per node": podName(s) != podName(Spec{Namespace: "team-a", Instance: "train", Node: "node-2"}) &&
			podName(s) == pod.Name,
	}
	for what, ok := range checks {
		if !ok {
			t.Errorf("mount pod: not %s:\n%+v", what, pod)
		}
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/var/lib/kubelet" ||
		*c.VolumeMounts[0].MountPropagation != corev1.MountPropagationBidirectional {
		t.Errorf("mount pod must mount the kubelet directory Bidirectional, got %+v", c.VolumeMounts)
	}
	if v := pod.Spec.Volumes[0].HostPath; v == nil || v.Path != "/var/lib/kubelet" {
		t.Errorf("mount pod must take the kubelet directory from the host, got %+v", pod.Spec.Volumes)
	}
	for _, e := range c.Env {
		t.Errorf("mount pod must carry no environment (the secret is a file), got %s", e.Name)
	}
}

// TestTerminatingMountPodStillRuns: a mount pod being deleted, as a drain
// evicts it, still runs its daemon, which is unmounting and publishing;
// only a pod whose container ended, or that is gone, does not. The client
// is the controller-runtime fake: a mount pod needs a kubelet and an
// image, which run only in the e2e suite, and Running reads nothing but
// the pod object.
func TestTerminatingMountPodStillRuns(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().Build()
	p := &Pod{Client: c, Namespace: "burstcache-system", Image: "burstcache:v1", KubeletDir: "/var/lib/kubelet", GracePeriod: time.Minute}
	s := Spec{Namespace: "team-a", Instance: "train", Node: "node-1", Target: "/t", Dir: t.TempDir()}
	if running, err := p.Running(ctx, s); running || err != nil {
		t.Fatalf("no pod: running %v, %v", running, err)
	}
	pod := p.BuildPod(s)
	// A finalizer keeps the deleted pod, with its deletion timestamp, as
	// the kubelet keeps it through its grace period.
	pod.Finalizers = []string{"test/keep"}
	pod.Status.Phase = corev1.PodRunning
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if running, err := p.Running(ctx, s); !running || err != nil {
		t.Fatalf("pod being deleted, its daemon publishing: running %v, %v; want running", running, err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodSucceeded
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if running, err := p.Running(ctx, s); running || err != nil {
		t.Fatalf("pod whose daemon ended: running %v, %v; want not running", running, err)
	}
}
