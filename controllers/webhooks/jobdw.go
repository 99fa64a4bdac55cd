package webhooks

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/controllers/directive"
)

// +kubebuilder:rbac:groups=cache.burstcache.io,resources=cacheinstances,verbs=create
// +kubebuilder:rbac:groups=cache.burstcache.io,resources=cachepools,verbs=get;list;watch

// errRefused marks a pod whose directives cannot be honoured.
var errRefused = errors.New("refused")

// applyDirectives translates the pod's DataWarp directives: a jobdw
// instance is created for the pod's controller (a Job, say), owned by it so
// that it is torn down, write-back first, when the Job goes; the pod is
// labelled with the instance it uses, so that it is gated and its mounts
// counted, and gets a volume that mounts the instance where the job
// expects its files. A pod uses at most one instance.
func (g *PodGate) applyDirectives(ctx context.Context, pod *corev1.Pod, text string) error {
	req, err := directive.Parse(text)
	if err != nil {
		return fmt.Errorf("%w: %w", errRefused, err)
	}
	if n := len(req.Persistent) + btoi(req.Job != nil); n > 1 {
		return fmt.Errorf("%w: the directives name %d instances; a pod uses one", errRefused, n)
	}
	var name string
	spec, job := req.Job, req.Job != nil
	switch {
	case job:
		if name, err = g.createJobInstance(ctx, pod, spec); err != nil {
			return err
		}
	case len(req.Persistent) == 1:
		name = req.Persistent[0]
		if spec, err = g.persistentSpec(ctx, pod.Namespace, name); err != nil {
			return err
		}
	default:
		return nil
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[cachev1alpha1.LabelInstance] = name
	return g.mountDirective(ctx, pod, name, spec, job)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// instanceName is what the CacheInstance schema allows as a name: it names
// the instance's Service and server pods.
var instanceName = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,45}[a-z0-9])?$`)

// createJobInstance creates (or finds, for the Job's other pods) the jobdw
// instance of the pod's controller, running as the pod's identity.
func (g *PodGate) createJobInstance(ctx context.Context, pod *corev1.Pod, spec *cachev1alpha1.CacheInstanceSpec) (string, error) {
	owner := metav1.GetControllerOf(pod)
	if owner == nil {
		return "", fmt.Errorf("%w: jobdw needs a pod that a Job or another controller owns, whose deletion tears the instance down", errRefused)
	}
	if name := owner.Name + "-dw"; !instanceName.MatchString(name) {
		return "", fmt.Errorf("%w: jobdw names the instance %s after the pod's %s, and an instance name must be at most 47 characters of a-z, 0-9 and '-', "+
			"starting with a letter: give the %s a name of at most 44 such characters", errRefused, name, owner.Kind, owner.Kind)
	}
	sc := pod.Spec.SecurityContext
	if sc == nil || sc.RunAsUser == nil || sc.RunAsGroup == nil {
		return "", fmt.Errorf("%w: jobdw needs spec.securityContext.runAsUser and runAsGroup: the cache touches the file system as the job", errRefused)
	}
	spec.RunAs = cachev1alpha1.RunAs{UID: *sc.RunAsUser, GID: *sc.RunAsGroup, SupplementalGroups: sc.SupplementalGroups}
	if err := g.resolveFilesystem(ctx, spec); err != nil {
		return "", err
	}
	inst := &cachev1alpha1.CacheInstance{
		ObjectMeta: metav1.ObjectMeta{Name: owner.Name + "-dw", Namespace: pod.Namespace,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: owner.APIVersion, Kind: owner.Kind, Name: owner.Name, UID: owner.UID}}},
		Spec: *spec,
	}
	if r, err := admission.RequestFromContext(ctx); err == nil && r.DryRun != nil && *r.DryRun {
		return inst.Name, nil
	}
	err := g.Writer.Create(ctx, inst)
	switch {
	case apierrors.IsAlreadyExists(err):
		return inst.Name, g.checkJobInstance(ctx, inst.Namespace, inst.Name, owner)
	case err != nil:
		return "", fmt.Errorf("%w: creating the jobdw instance: %w", errRefused, err)
	}
	return inst.Name, nil
}

// checkJobInstance accepts a jobdw instance that exists already only if
// it is the one of this very controller, made for one of its other pods,
// and not being torn down. One of an earlier Job of the same name (still
// writing back, or not yet collected) caches what that Job asked for, and
// its teardown would wait for ever for the new pods, which count as its
// mounts and wait for it to be Ready. The pod is refused with the reason;
// the Job's controller creates it again later, once the old one is gone.
func (g *PodGate) checkJobInstance(ctx context.Context, ns, name string, owner *metav1.OwnerReference) error {
	cur := &cachev1alpha1.CacheInstance{}
	if err := g.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cur); err != nil {
		return fmt.Errorf("reading the jobdw instance %s: %w", name, err)
	}
	owned := false
	for _, ref := range cur.OwnerReferences {
		owned = owned || ref.UID == owner.UID
	}
	switch {
	case !owned:
		return fmt.Errorf("%w: CacheInstance %s exists and belongs to another %s %s (an earlier one of the same name, or another owner); "+
			"the pod can be created once it is gone", errRefused, name, owner.Kind, owner.Name)
	case !cur.DeletionTimestamp.IsZero():
		return fmt.Errorf("%w: CacheInstance %s of %s %s is being torn down", errRefused, name, owner.Kind, owner.Name)
	}
	return nil
}

// resolveFilesystem picks the pool's backing file system that holds a path
// named by pfs= or a stage-out destination, as DataWarp names none.
func (g *PodGate) resolveFilesystem(ctx context.Context, spec *cachev1alpha1.CacheInstanceSpec) error {
	if spec.Pool == "" {
		return fmt.Errorf("%w: jobdw needs pool=", errRefused)
	}
	pool := &cachev1alpha1.CachePool{}
	if err := g.Reader.Get(ctx, client.ObjectKey{Name: spec.Pool}, pool); err != nil {
		return fmt.Errorf("%w: reading CachePool %s: %w", errRefused, spec.Pool, err)
	}
	for _, bp := range []*cachev1alpha1.BackingPath{spec.Backing, stageOutPath(spec)} {
		if bp == nil || bp.Filesystem != "" {
			continue
		}
		for _, fs := range pool.Spec.BackingFilesystems {
			mp := string(fs.MountPath)
			if p := string(bp.Path); p == mp || strings.HasPrefix(p, strings.TrimSuffix(mp, "/")+"/") {
				bp.Filesystem = fs.Name
			}
		}
		if bp.Filesystem == "" {
			return fmt.Errorf("%w: no backing file system of CachePool %s holds %s", errRefused, pool.Name, bp.Path)
		}
	}
	return nil
}

func stageOutPath(spec *cachev1alpha1.CacheInstanceSpec) *cachev1alpha1.BackingPath {
	if spec.StageOut == nil {
		return nil
	}
	return &spec.StageOut.Destination
}
