// Package mountkey keeps the cluster's mount key: the key that tells the
// mounts of the CSI node plugins from everyone else who holds an instance's
// shared secret, which is in a Secret of the instance's namespace that
// users of the namespace may read.
//
// The manager makes the key once, in a Secret of its own namespace
// (cachev1alpha1.MountKeySecretName), and gives its public half to the
// servers of instances that act as their callers; those servers then admit
// only mounts that sign with its private half, which the node plugins read
// from the Secret. To replace the key, delete the Secret and restart the
// manager and the node plugins; server pods made before keep the old public
// key (the instance's ServersOutdated condition names them) until they are
// deleted and made anew.
package mountkey

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/cacheserver/control"
)

// Ensure returns the public half, in base64, of the mount key in the Secret
// key, which it creates with a new key if it is not there. r reads
// uncached, so that the manager watches no Secrets; w creates. A Secret
// that holds no key is an error that names it: replacing a key mounts
// already use would lock them out of the servers that have its public half.
func Ensure(ctx context.Context, r client.Reader, w client.Writer, key client.ObjectKey) (string, error) {
	s := &corev1.Secret{}
	err := r.Get(ctx, key, s)
	if apierrors.IsNotFound(err) {
		if err = create(ctx, w, key); err == nil || apierrors.IsAlreadyExists(err) {
			// Another replica may have made it first: its key is the key.
			err = r.Get(ctx, key, s)
		}
	}
	if err != nil {
		return "", fmt.Errorf("reading the mount key Secret %s: %w", key, err)
	}
	pub, err := control.MountPublicKey(string(s.Data[cachev1alpha1.MountKeySecretKey]))
	if err != nil {
		return "", fmt.Errorf("the Secret %s holds no mount key in %q (delete it, and the manager makes a new one): %w", key, cachev1alpha1.MountKeySecretKey, err)
	}
	return pub, nil
}

func create(ctx context.Context, w client.Writer, key client.ObjectKey) error {
	priv, _, err := control.NewMountKey()
	if err != nil {
		return err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: map[string]string{
			"app.kubernetes.io/part-of": "burstcache", "app.kubernetes.io/component": "mount-key",
		}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{cachev1alpha1.MountKeySecretKey: []byte(priv)},
	}
	return w.Create(ctx, s)
}
