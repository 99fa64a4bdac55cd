package v1alpha1_test

import (
	"errors"
	"strconv"
	"strings"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Bad specs are written the way users write them, as YAML, so that the tests
// can send values the Go types cannot hold (a malformed duration, a missing
// required field). Each starts from a valid object and changes one thing.

// validInstanceYAML is a minimal valid cache instance.
const validInstanceYAML = `
apiVersion: cache.burstcache.io/v1alpha1
kind: CacheInstance
metadata:
  generateName: instance-
spec:
  pool: lustre-nvme
  capacity: 1Ti
  backing:
    filesystem: lustre
    path: /lus/global/projects/climate
  runAs:
    uid: 20017
    gid: 20000
`

// validPoolYAML is a minimal valid pool.
const validPoolYAML = `
apiVersion: cache.burstcache.io/v1alpha1
kind: CachePool
metadata:
  generateName: pool-
spec:
  media:
    hostPath:
      path: /mnt/nvme
    capacityPerNode: 3Ti
  allocationGranularity: 256Gi
  backingFilesystems:
  - name: lustre
    mountPath: /lus/global
    hostPath:
      path: /lus/global
    accessRules:
    - namespaces: [climate]
      pathPrefixes: [/lus/global/projects/climate]
      uidRanges: [{min: 20000, max: 20999}]
      gidRanges: [{min: 20000, max: 20099}]
`

// edit changes an unstructured object. Paths are dotted field names with
// optional list indexes, such as "spec.backingFilesystems[0].name".
type edit func(obj map[string]any)

// set returns an edit that sets path to the value parsed from YAML, so that
// set("spec.capacity", "0") sends the number 0 and set("spec.x", `"0"`) the
// string "0".
func set(path, valueYAML string) edit {
	return func(obj map[string]any) {
		var v any
		ExpectWithOffset(2, yaml.Unmarshal([]byte(valueYAML), &v)).To(Succeed())
		parent, key := walk(obj, path)
		parent[key] = v
	}
}

// unset returns an edit that removes the field at path.
func unset(path string) edit {
	return func(obj map[string]any) {
		parent, key := walk(obj, path)
		delete(parent, key)
	}
}

// walk returns the map holding the last element of path, creating maps on
// the way, and the last element's key.
func walk(obj map[string]any, path string) (map[string]any, string) {
	parts := strings.Split(path, ".")
	cur := obj
	for _, part := range parts[:len(parts)-1] {
		name, index := splitIndex(part)
		next, ok := cur[name]
		if !ok {
			next = map[string]any{}
			cur[name] = next
		}
		if index >= 0 {
			next = next.([]any)[index]
		}
		cur = next.(map[string]any)
	}
	return cur, parts[len(parts)-1]
}

// splitIndex splits "name[3]" into "name" and 3; without an index it returns
// -1.
func splitIndex(part string) (string, int) {
	name, rest, ok := strings.Cut(part, "[")
	if !ok {
		return part, -1
	}
	i, err := strconv.Atoi(strings.TrimSuffix(rest, "]"))
	Expect(err).NotTo(HaveOccurred(), "bad index in %q", part)
	return name, i
}

// object parses YAML into an unstructured object and applies the edits.
func object(baseYAML, namespace string, edits ...edit) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	ExpectWithOffset(1, yaml.Unmarshal([]byte(baseYAML), &u.Object)).To(Succeed())
	for _, e := range edits {
		e(u.Object)
	}
	if namespace != "" {
		u.SetNamespace(namespace)
	}
	return u
}

// expectRejected asserts that err is the API server's Invalid error with a
// cause for field whose message contains message: what `kubectl apply`
// prints as "<field>: <message>".
func expectRejected(err error, field, message string) {
	ExpectWithOffset(1, err).To(HaveOccurred(), "the API server accepted the object")
	ExpectWithOffset(1, apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got: %v", err)
	var statusErr *apierrors.StatusError
	ExpectWithOffset(1, errors.As(err, &statusErr)).To(BeTrue())
	details := statusErr.Status().Details
	ExpectWithOffset(1, details).NotTo(BeNil(), "no details in: %v", err)
	ExpectWithOffset(1, details.Causes).To(ContainElement(And(
		HaveField("Field", field),
		HaveField("Message", ContainSubstring(message)),
	)), "the user sees: %v", err)
	ExpectWithOffset(1, err.Error()).To(ContainSubstring(field))
	ExpectWithOffset(1, err.Error()).To(ContainSubstring(message))
}

// causes lists the fields and messages of an Invalid error, for failure
// messages.
func causes(err error) []metav1.StatusCause {
	var statusErr *apierrors.StatusError
	if errors.As(err, &statusErr) && statusErr.Status().Details != nil {
		return statusErr.Status().Details.Causes
	}
	return nil
}
