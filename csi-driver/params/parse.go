package params

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// ErrInvalid is wrapped by every error about bad parameters or annotations.
var ErrInvalid = errors.New("invalid volume parameters")

// Params is what the StorageClass and the PVC ask for.
type Params struct {
	// Pool is the pool of a dynamic volume.
	Pool string
	// Instance is the instance a named volume mounts; empty for a dynamic
	// volume.
	Instance string
	// SubPath is the directory pods see, relative to the instance's root.
	SubPath string
	// Spec holds the knobs of a dynamic volume's instance; its capacity and
	// pool are not set. RunAs is what the user asked for, if RunAsSet.
	Spec cachev1alpha1.CacheInstanceSpec
	// RunAsSet reports whether the input set runAsUID.
	RunAsSet bool
}

// Named reports whether the volume mounts an existing instance.
func (p *Params) Named() bool { return p.Instance != "" }

// Parse reads the StorageClass parameters and then the PVC annotations,
// which override them. It returns an error wrapping ErrInvalid that names
// the first bad key.
func Parse(scParams, pvcAnnotations map[string]string) (*Params, error) {
	merged, err := merge(scParams, pvcAnnotations)
	if err != nil {
		return nil, err
	}
	p := &Params{}
	for _, k := range sortedKeys(merged) {
		if err := set(p, k, merged[k]); err != nil {
			return nil, fmt.Errorf("%w: %s=%q: %w", ErrInvalid, k, merged[k], err)
		}
	}
	if err := p.check(merged, claimKeys(pvcAnnotations)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return p, nil
}

// merge returns the keys of both inputs, the PVC's winning, and refuses
// unknown keys and a pool set by the PVC.
func merge(scParams, pvcAnnotations map[string]string) (map[string]string, error) {
	out := map[string]string{}
	for k, v := range scParams {
		if strings.HasPrefix(k, sidecarPrefix) {
			continue
		}
		if setters[k] == nil {
			return nil, fmt.Errorf("%w: unknown StorageClass parameter %q", ErrInvalid, k)
		}
		out[k] = v
	}
	for a, v := range pvcAnnotations {
		k, ok := strings.CutPrefix(a, AnnotationPrefix)
		switch {
		case !ok:
			continue
		case setters[k] == nil:
			return nil, fmt.Errorf("%w: unknown PVC annotation %q", ErrInvalid, a)
		case k == Pool:
			return nil, fmt.Errorf("%w: PVC annotation %q: the pool is set by the StorageClass only", ErrInvalid, a)
		}
		out[k] = v
	}
	return out, nil
}

// claimKeys returns the keys the PVC's annotations set.
func claimKeys(pvcAnnotations map[string]string) map[string]bool {
	out := map[string]bool{}
	for a := range pvcAnnotations {
		if k, ok := strings.CutPrefix(a, AnnotationPrefix); ok {
			out[k] = true
		}
	}
	return out
}

// check refuses combinations no single key shows wrong. A named volume
// takes the knobs of the instance it mounts: the StorageClass's knobs
// describe new instances and do not apply to it, but a claim that sets one
// asks for something it cannot have, and is refused.
func (p *Params) check(keys map[string]string, fromClaim map[string]bool) error {
	if p.Named() {
		for k := range fromClaim {
			if !namedKeys[k] {
				return fmt.Errorf("%s does not apply to a volume of an existing instance (%s=%s)", k, Instance, p.Instance)
			}
		}
		return nil
	}
	if p.Pool == "" {
		return fmt.Errorf("missing %s: the StorageClass must name a CachePool", Pool)
	}
	if p.Spec.Type != cachev1alpha1.CacheTypeScratch && p.Spec.Backing == nil {
		return fmt.Errorf("missing %s: a cache volume needs the backing path it caches", BackingPath)
	}
	if _, gid := keys[RunAsGID]; p.RunAsSet != gid {
		return fmt.Errorf("%s and %s go together", RunAsUID, RunAsGID)
	}
	return nil
}

func checkInstanceName(v string) error {
	if strings.Contains(v, "/") {
		return errors.New("an instance of another namespace cannot be mounted")
	}
	if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

func checkSubPath(v string) error {
	if v == "" || path.IsAbs(v) || path.Clean(v) != v || v == ".." || strings.HasPrefix(v, "../") {
		return errors.New("want a clean relative path inside the instance")
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func set(p *Params, key, value string) error {
	return setters[key](p, value)
}
