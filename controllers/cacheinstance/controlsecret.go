package cacheinstance

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// secretCache holds the data secret of each instance, by UID, for the
// control calls that every pass makes: servers serve their control API
// only to callers that hold the secret, and reading it from the API server
// on every pass would cost as much as caching every Secret would expose.
// An instance's secret changes only when ensureSecret makes a new one,
// which it records here.
type secretCache struct{ m sync.Map }

func (c *secretCache) load(uid types.UID) ([]byte, bool) {
	v, ok := c.m.Load(uid)
	if !ok {
		return nil, false
	}
	return v.([]byte), true
}

func (c *secretCache) store(uid types.UID, sec *corev1.Secret) {
	c.m.Store(uid, sec.Data[cachev1alpha1.DataSecretKey])
}

func (c *secretCache) forget(uid types.UID) { c.m.Delete(uid) }

// controlSecret returns the instance's data secret, read once from the API
// server and then remembered.
func (r *Reconciler) controlSecret(ctx context.Context, inst *cachev1alpha1.CacheInstance) ([]byte, error) {
	if b, ok := r.secrets.load(inst.UID); ok {
		return b, nil
	}
	sec := &corev1.Secret{}
	key := client.ObjectKey{Namespace: inst.Namespace, Name: cachev1alpha1.DataSecretName(inst.Name)}
	if err := r.APIReader.Get(ctx, key, sec); err != nil {
		return nil, fmt.Errorf("reading the data secret, which the servers' control API asks for: %w", err)
	}
	if err := checkSecret(inst, sec); err != nil {
		return nil, err
	}
	r.secrets.store(inst.UID, sec)
	return sec.Data[cachev1alpha1.DataSecretKey], nil
}
