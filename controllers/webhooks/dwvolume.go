package webhooks

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/csi-driver/params"
)

// DirectiveVolume is the name of the volume through which a pod with #DW
// directives sees its instance.
const DirectiveVolume = "burstcache-dw"

// scratchMountRoot is where the instance of a scratch directive, which
// caches no path, is mounted.
const scratchMountRoot = "/var/opt/burstcache/"

// mountDirective makes the pod see the instance its directives name, as a
// DataWarp job sees its allocation: a generic ephemeral volume whose claim
// mounts the instance by name (so the claim, gone with the pod, never
// deletes the instance), mounted in every container at the path the
// instance caches, and DataWarp's environment variables naming that path.
// Adding it twice changes nothing, since the webhook may be invoked again.
func (g *PodGate) mountDirective(ctx context.Context, pod *corev1.Pod, name string, spec *cachev1alpha1.CacheInstanceSpec, job bool) error {
	class, err := g.directiveClass(ctx, spec.Pool)
	if err != nil {
		return err
	}
	path := mountPath(name, spec)
	if !hasVolume(pod, DirectiveVolume) {
		pod.Spec.Volumes = append(pod.Spec.Volumes, directiveVolume(name, class, spec))
	}
	env := directiveEnv(name, spec, path, job)
	for i := range pod.Spec.InitContainers {
		mountInto(&pod.Spec.InitContainers[i], path, env)
	}
	for i := range pod.Spec.Containers {
		mountInto(&pod.Spec.Containers[i], path, env)
	}
	return nil
}

// persistentSpec reads the spec of the existing instance a persistentdw
// directive names.
func (g *PodGate) persistentSpec(ctx context.Context, ns, name string) (*cachev1alpha1.CacheInstanceSpec, error) {
	inst := &cachev1alpha1.CacheInstance{}
	err := g.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, inst)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: persistentdw: no CacheInstance %s in namespace %s", errRefused, name, ns)
	}
	if err != nil {
		return nil, fmt.Errorf("reading CacheInstance %s: %w", name, err)
	}
	return &inst.Spec, nil
}

// directiveClass picks the StorageClass of burstcache's driver through
// which directives mount instances: one that names the instance's pool if
// there is one, else any, the first by name so that the choice is stable.
func (g *PodGate) directiveClass(ctx context.Context, pool string) (string, error) {
	var list storagev1.StorageClassList
	if err := g.Reader.List(ctx, &list); err != nil {
		return "", fmt.Errorf("listing StorageClasses: %w", err)
	}
	var ours, samePool []string
	for _, sc := range list.Items {
		if sc.Provisioner != cachev1alpha1.DriverName {
			continue
		}
		ours = append(ours, sc.Name)
		if sc.Parameters[params.Pool] == pool {
			samePool = append(samePool, sc.Name)
		}
	}
	sort.Strings(ours)
	sort.Strings(samePool)
	switch {
	case len(samePool) > 0:
		return samePool[0], nil
	case len(ours) > 0:
		return ours[0], nil
	}
	return "", fmt.Errorf("%w: no StorageClass of %s exists to mount the cache into the pod; ask an admin to create one", errRefused, cachev1alpha1.DriverName)
}

func directiveVolume(name, class string, spec *cachev1alpha1.CacheInstanceSpec) corev1.Volume {
	claim := corev1.PersistentVolumeClaimSpec{
		StorageClassName: &class,
		AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
		Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: spec.Capacity}},
	}
	return corev1.Volume{Name: DirectiveVolume, VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
		VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{params.AnnotationPrefix + params.Instance: name}},
			Spec:       claim,
		},
	}}}
}

// mountPath is where pods see the instance: the path it caches, so that
// the job's paths do not change, or a directory of its own for scratch.
func mountPath(name string, spec *cachev1alpha1.CacheInstanceSpec) string {
	if spec.Backing != nil {
		return string(spec.Backing.Path)
	}
	return scratchMountRoot + name
}

// directiveEnv returns DataWarp's variables for the instance: DW_JOB_STRIPED
// (DW_JOB_LDBAL for a load-balanced one), with _CACHE variants for a
// transparent cache, or DW_PERSISTENT_STRIPED_<NAME> for a persistentdw.
func directiveEnv(name string, spec *cachev1alpha1.CacheInstanceSpec, path string, job bool) []corev1.EnvVar {
	mode := "STRIPED"
	if spec.AccessMode == cachev1alpha1.AccessModeLoadBalanced {
		mode = "LDBAL"
	}
	if !job {
		key := "DW_PERSISTENT_" + mode + "_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(name))
		return []corev1.EnvVar{{Name: key, Value: path}}
	}
	env := []corev1.EnvVar{{Name: "DW_JOB_" + mode, Value: path}}
	if spec.Backing != nil {
		env = append(env, corev1.EnvVar{Name: "DW_JOB_" + mode + "_CACHE", Value: path})
	}
	return env
}

func mountInto(c *corev1.Container, path string, env []corev1.EnvVar) {
	if !hasMount(c, path) {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: DirectiveVolume, MountPath: path})
	}
	for _, e := range env {
		if !hasEnv(c, e.Name) {
			c.Env = append(c.Env, e)
		}
	}
}

func hasVolume(pod *corev1.Pod, name string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Name == name {
			return true
		}
	}
	return false
}

func hasMount(c *corev1.Container, path string) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath == path {
			return true
		}
	}
	return false
}

func hasEnv(c *corev1.Container, name string) bool {
	for _, e := range c.Env {
		if e.Name == name {
			return true
		}
	}
	return false
}
