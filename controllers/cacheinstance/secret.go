package cacheinstance

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// dataSecretBytes is the length of the data-path shared secret.
const dataSecretBytes = 32

// Where the data secret is mounted in the server container.
const (
	secretMountPath = "/etc/burstcache/data-secret"
	secretFile      = secretMountPath + "/" + cachev1alpha1.DataSecretKey
)

// errForeignSecret is wrapped when a Secret of the data secret's name
// exists but was not made by the operator for this instance.
var errForeignSecret = errors.New("a Secret of that name exists and is not the instance's data secret")

// ensureSecret creates the instance's data-path Secret before its servers:
// servers started with it admit only the clients that prove they hold it,
// that is mounts whose PersistentVolume hands it to the node plugin, and
// not any pod that can reach a server port. An existing Secret is kept, so
// that servers and mounts of the instance keep agreeing. The Secret is read
// with the API reader: caching every Secret of the cluster in the manager
// would be both costly and needless exposure. It is read only when a
// server pod is to be created, not on every pass.
func (r *Reconciler) ensureSecret(ctx context.Context, s *scope) (ctrl.Result, error) {
	if allPodsLive(s) {
		return ctrl.Result{}, nil
	}
	cur := &corev1.Secret{}
	key := client.ObjectKey{Namespace: s.inst.Namespace, Name: cachev1alpha1.DataSecretName(s.inst.Name)}
	err := r.APIReader.Get(ctx, key, cur)
	switch {
	case err == nil:
		if err := checkSecret(s.inst, cur); err != nil {
			s.createErr = err
			return ctrl.Result{}, err
		}
		r.secrets.store(s.inst.UID, cur)
		return ctrl.Result{}, nil
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, fmt.Errorf("reading the data secret: %w", err)
	}
	sec, err := newDataSecret(s.inst)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Forgotten rather than stored: if another pass created the Secret
	// first, createIfMissing keeps that one, which controlSecret reads.
	r.secrets.forget(s.inst.UID)
	return ctrl.Result{}, r.createIfMissing(ctx, s, sec)
}

// allPodsLive reports whether every placed server has a pod that runs or
// may run, so that ensurePods creates none.
func allPodsLive(s *scope) bool {
	for i := range s.inst.Status.Servers {
		pod := s.pods[i]
		if pod == nil || !pod.DeletionTimestamp.IsZero() || podEnded(pod) {
			return false
		}
	}
	return true
}

// checkSecret refuses a Secret that someone other than the operator put in
// the data secret's place: its servers would trust a secret the user chose.
func checkSecret(inst *cachev1alpha1.CacheInstance, sec *corev1.Secret) error {
	if sec.Labels[cachev1alpha1.LabelInstance] != inst.Name ||
		sec.Labels[cachev1alpha1.LabelComponent] != cachev1alpha1.ComponentServer ||
		len(sec.Data[cachev1alpha1.DataSecretKey]) < dataSecretBytes {
		return reconcile.TerminalError(fmt.Errorf("secret %s: %w", sec.Name, errForeignSecret))
	}
	return nil
}

func newDataSecret(inst *cachev1alpha1.CacheInstance) (*corev1.Secret, error) {
	raw := make([]byte, dataSecretBytes)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("making the data secret: %w", err)
	}
	// The servers and mounts trim the file they read, so the secret is
	// stored as hex rather than raw bytes that may end in white space.
	val := make([]byte, 0, 2*dataSecretBytes)
	for _, b := range raw {
		val = fmt.Appendf(val, "%02x", b)
	}
	return &corev1.Secret{
		ObjectMeta: objectMeta(inst, cachev1alpha1.DataSecretName(inst.Name)),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{cachev1alpha1.DataSecretKey: val},
	}, nil
}

// deleteSecret deletes the data secret once the servers are gone; nothing
// can use it any more. A Secret of its name that the operator did not make
// (checkSecret refused it, and no server started) is someone else's, and
// is left alone.
func (r *Reconciler) deleteSecret(ctx context.Context, s *scope) (ctrl.Result, error) {
	sec := &corev1.Secret{}
	key := client.ObjectKey{Namespace: s.inst.Namespace, Name: cachev1alpha1.DataSecretName(s.inst.Name)}
	err := r.APIReader.Get(ctx, key, sec)
	switch {
	case apierrors.IsNotFound(err) || (err == nil && checkSecret(s.inst, sec) != nil):
		r.secrets.forget(s.inst.UID)
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("reading the data secret: %w", err)
	}
	if err := r.Client.Delete(ctx, sec, client.Preconditions{UID: &sec.UID}); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("deleting the data secret: %w", err)
	}
	r.secrets.forget(s.inst.UID)
	return ctrl.Result{}, nil
}

// secretVolume projects the data secret into the server container. The
// server runs as runAs, not root, and the pod sets no fsGroup (kubelet would
// then chown a backing claim), so the file must be world-readable; only the
// server container mounts it.
func secretVolume(inst *cachev1alpha1.CacheInstance) corev1.Volume {
	return corev1.Volume{Name: "data-secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName:  cachev1alpha1.DataSecretName(inst.Name),
		Items:       []corev1.KeyToPath{{Key: cachev1alpha1.DataSecretKey, Path: cachev1alpha1.DataSecretKey}},
		DefaultMode: ptrTo(int32(0o444)),
	}}}
}
