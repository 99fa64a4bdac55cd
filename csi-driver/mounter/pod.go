package mounter

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// Pod runs each daemon in a mount pod, as JuiceFS does: a privileged pod,
// pinned to the node, in the plugin's namespace, running the image's
// `burstcache mount` with the kubelet directory mounted Bidirectional so
// that its FUSE mount propagates to the host and from there into the pods
// that use the volume. The pod belongs to no controller: it outlives a
// restart or an upgrade of the plugin, and only Stop deletes it.
type Pod struct {
	// Client creates, reads and deletes the mount pods.
	Client client.Client
	// Namespace is where mount pods live: the plugin's own namespace.
	Namespace string
	// Image is the burstcache image; its entrypoint must be the burstcache
	// binary.
	Image string
	// PullPolicy is the pull policy of Image; empty leaves it to
	// Kubernetes, which pulls a latest tag every time.
	PullPolicy corev1.PullPolicy
	// PullSecrets name the Secrets, in Namespace, that pull Image.
	PullSecrets []corev1.LocalObjectReference
	// KubeletDir is the host's kubelet directory, which holds the staging
	// paths; the plugin's state directory must lie below it.
	KubeletDir string
	// GracePeriod bounds how long unmounting and publishing may take when the
	// pod is deleted; it must be longer than any Stop a caller waits for.
	GracePeriod time.Duration
}

var _ Mounter = (*Pod)(nil)

// podName returns the name of the mount pod of s: one per instance and node.
func podName(s Spec) string {
	sum := sha256.Sum256([]byte(s.Namespace + "/" + s.Instance + "\x00" + s.Node))
	return "burstcache-mount-" + hex.EncodeToString(sum[:10])
}

// BuildPod returns the mount pod of s.
func (p *Pod) BuildPod(s Spec) *corev1.Pod {
	bidi := corev1.MountPropagationBidirectional
	hostDir := corev1.HostPathDirectory
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: podName(s), Namespace: p.Namespace,
			Labels: map[string]string{
				cachev1alpha1.LabelComponent: "mount-daemon",
				cachev1alpha1.LabelInstance:  s.Instance,
			},
			Annotations: map[string]string{"cache.burstcache.io/volume": s.Namespace + "/" + s.Instance},
		},
		Spec: corev1.PodSpec{
			NodeName:      s.Node,
			RestartPolicy: corev1.RestartPolicyNever,
			// The kernel names a FUSE request's caller by its pid in the
			// daemon's pid namespace, and callers in another one (every
			// pod's) by pid 0: the daemon reads callers' supplementary
			// groups and capabilities by pid, for servers that act as the
			// caller.
			HostPID: true,
			// The mount must keep running while the node drains: the pods
			// that use it are evicted first, and the plugin stops it.
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			PriorityClassName:             "system-node-critical",
			TerminationGracePeriodSeconds: ptr.To(int64(p.GracePeriod.Seconds())),
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			ImagePullSecrets:              p.PullSecrets,
			Containers: []corev1.Container{{
				Name:            "mount",
				Image:           p.Image,
				ImagePullPolicy: p.PullPolicy,
				Args:            s.Args(),
				SecurityContext: &corev1.SecurityContext{
					Privileged: ptr.To(true), RunAsUser: ptr.To(int64(0)),
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "kubelet", MountPath: p.KubeletDir, MountPropagation: &bidi},
				},
			}},
			Volumes: []corev1.Volume{{
				Name:         "kubelet",
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: p.KubeletDir, Type: &hostDir}},
			}},
		},
	}
}

// Start creates the mount pod, replacing one that has ended, and waits
// until its mount serves.
func (p *Pod) Start(ctx context.Context, s Spec) error {
	if err := p.removeEnded(ctx, s); err != nil {
		return err
	}
	if err := prepare(s.Dir); err != nil {
		return err
	}
	if err := p.Client.Create(ctx, p.BuildPod(s)); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating mount pod: %w", err)
	}
	err := p.waitReady(ctx, s)
	if err != nil {
		// The pod never served, so it holds nothing to publish.
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: podName(s)}}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = p.Client.Delete(dctx, pod, client.GracePeriodSeconds(0))
	}
	return err
}

// waitReady waits until the mount pod's daemon serves.
func (p *Pod) waitReady(ctx context.Context, s Spec) error {
	t := time.NewTicker(pollInterval * 4)
	defer t.Stop()
	for !ready(s) {
		pod, err := p.get(ctx, s)
		if err != nil {
			return err
		}
		if pod == nil || ended(pod) {
			return fmt.Errorf("%w: mount pod %s/%s ended", ErrNotReady, p.Namespace, podName(s))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrNotReady, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// removeEnded deletes the mount pod of s if it has ended, so that a new one
// can take its name.
func (p *Pod) removeEnded(ctx context.Context, s Spec) error {
	pod, err := p.get(ctx, s)
	if err != nil || pod == nil || !ended(pod) {
		return err
	}
	if err := p.Client.Delete(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting ended mount pod: %w", err)
	}
	return p.waitGone(ctx, s)
}

// Running reports whether the mount pod of s exists and its container has
// not ended. A pod being deleted (evicted by a drain, say) still runs: its
// daemon got SIGTERM and is unmounting and publishing, for up to its grace
// period. Counted as gone, it would be reported lost, its mounts detached
// under it and, once the new pod it cannot make times out, killed.
func (p *Pod) Running(ctx context.Context, s Spec) (bool, error) {
	pod, err := p.get(ctx, s)
	if err != nil || pod == nil {
		return false, err
	}
	return !ended(pod), nil
}

// Stop deletes the mount pod, whose daemon gets SIGTERM, unmounts and
// publishes, and waits until the pod is gone.
func (p *Pod) Stop(ctx context.Context, s Spec) error {
	pod, err := p.get(ctx, s)
	if err != nil {
		return err
	}
	if pod != nil && pod.DeletionTimestamp == nil {
		if err := p.Client.Delete(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting mount pod: %w", err)
		}
	}
	if err := p.waitGone(ctx, s); err != nil {
		return fmt.Errorf("%w: %w", ErrStopTimeout, err)
	}
	return ExitStatus(s.Dir)
}

func (p *Pod) waitGone(ctx context.Context, s Spec) error {
	t := time.NewTicker(pollInterval * 4)
	defer t.Stop()
	for {
		pod, err := p.get(ctx, s)
		if err != nil || pod == nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// get returns the mount pod of s, or nil if there is none.
func (p *Pod) get(ctx context.Context, s Spec) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	err := p.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: podName(s)}, pod)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading mount pod: %w", err)
	}
	return pod, nil
}

// ended reports whether the pod's daemon has ended.
func ended(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}
