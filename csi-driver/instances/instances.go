package instances

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/csi-driver/params"
	"github.com/burstcache/burstcache/csi-driver/volume"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrInvalid is params.ErrInvalid: the request cannot be honoured as
	// written.
	ErrInvalid = params.ErrInvalid
	// ErrNotFound means a named volume's instance does not exist.
	ErrNotFound = errors.New("instance not found")
	// ErrNoCapacity means the capacity asked for is beyond what the pool
	// (or a named instance) can ever hold.
	ErrNoCapacity = errors.New("capacity beyond the pool")
	// ErrConflict means a volume of that name exists for another request.
	ErrConflict = errors.New("volume exists with different parameters")
)

// Annotations on the instances of dynamic volumes.
const (
	// AnnotationVolume names the volume an instance was created for; only
	// such an instance is deleted with its volume.
	AnnotationVolume = "csi.burstcache.io/volume"
	// AnnotationClaim is the namespace/name of the claim it was made for.
	AnnotationClaim = "csi.burstcache.io/claim"
	// AnnotationRequest is a digest of the request, which tells a retried
	// creation from a conflicting one.
	AnnotationRequest = "csi.burstcache.io/request"
	// AnnotationReclaimPolicy is the reclaim policy of the volume's class,
	// when the creator knows it: an instance of a Delete volume whose claim
	// went before its PV was made is deleted, one of a Retain volume never.
	AnnotationReclaimPolicy = "csi.burstcache.io/reclaim-policy"
)

// Request is a volume to create.
type Request struct {
	// Name is the volume's name: the PV name, and the dynamic instance's.
	Name string
	// Namespace and Claim name the PVC.
	Namespace, Claim string
	// Capacity is the claim's request.
	Capacity resource.Quantity
	// Params are the parsed StorageClass parameters and PVC annotations.
	Params *params.Params
	// ReclaimPolicy is the class's reclaim policy, if known.
	ReclaimPolicy string
}

// Volume is a created volume.
type Volume struct {
	// ID is the CSI volume ID, volume.ID(namespace, instance).
	ID string
	// Capacity is the volume's size.
	Capacity resource.Quantity
	// Context is the volume context for the node plugin.
	Context map[string]string
	// SecretName and SecretNamespace name the instance's data Secret, the
	// PV's nodeStageSecretRef.
	SecretName, SecretNamespace string
	// Dynamic reports whether the instance was created for the volume.
	Dynamic bool
}

// Instances creates and deletes the instances of volumes.
type Instances struct {
	// Client reads pools, namespaces and instances, and writes instances.
	Client client.Client
}

func newVolume(namespace, instance string, capacity resource.Quantity, p *params.Params, dynamic bool) Volume {
	v := Volume{
		ID: volume.ID(namespace, instance), Capacity: capacity, Context: map[string]string{},
		SecretName: cachev1alpha1.DataSecretName(instance), SecretNamespace: namespace, Dynamic: dynamic,
	}
	if p.SubPath != "" {
		v.Context[volume.ContextSubPath] = p.SubPath
	}
	return v
}

// digest identifies a request, for telling retries from conflicts.
func digest(req Request) string {
	b, _ := json.Marshal(struct {
		Namespace, Claim, Capacity string
		Params                     *params.Params
	}{req.Namespace, req.Claim, req.Capacity.String(), req.Params})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}
