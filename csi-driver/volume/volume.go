package volume

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ErrBadID is wrapped by ParseID for a volume ID that does not name an
// instance.
var ErrBadID = errors.New("malformed volume ID")

// Volume context keys, set by the provisioner on PersistentVolumes (or by an
// admin on a static PV) and read by the node plugin.
const (
	// ContextSubPath is the directory, relative to the instance's root, that
	// NodePublishVolume bind-mounts into the pod; empty means the root.
	ContextSubPath = "subPath"
)

// ID returns the volume ID of the CacheInstance namespace/name.
func ID(namespace, name string) string { return namespace + "/" + name }

// ParseID returns the namespace and name of the CacheInstance a volume ID
// names.
func ParseID(id string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(id, "/")
	if !ok || len(validation.IsDNS1123Label(namespace)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return "", "", fmt.Errorf("%w %q: want <namespace>/<cacheinstance>", ErrBadID, id)
	}
	return namespace, name, nil
}

// MountLeaseName returns the name of the Lease by which the node plugin of
// node reports that it has the instance named instance staged. Names that
// would be too long are shortened with a hash, so that every pair has its
// own Lease.
func MountLeaseName(instance, node string) string {
	name := instance + ".mount." + node
	if len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(instance + "\x00" + node))
	return instance[:min(len(instance), 180)] + ".mount." + hex.EncodeToString(sum[:16])
}

// maxInstanceName is the longest instance name a volume is given as is:
// the instance's Service, <instance>-servers, must be a DNS label.
const maxInstanceName = 47

// InstanceName returns the name of the CacheInstance of a dynamic volume
// that CreateVolume named name. CSI names are any string of up to 128
// characters; one that is not a short DNS label is replaced by a name made
// from its hash, so that a retried CreateVolume finds the same instance.
func InstanceName(name string) string {
	if len(name) <= maxInstanceName && len(validation.IsDNS1035Label(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "vol-" + hex.EncodeToString(sum[:16])
}
