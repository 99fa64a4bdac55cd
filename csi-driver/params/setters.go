package params

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// setters apply one key's value to Params; every known key has one.
var setters = map[string]func(p *Params, v string) error{
	Pool:     func(p *Params, v string) error { p.Pool = v; return nonEmpty(v) },
	Instance: func(p *Params, v string) error { p.Instance = v; return checkInstanceName(v) },
	SubPath:  func(p *Params, v string) error { p.SubPath = v; return checkSubPath(v) },
	BackingFilesystem: func(p *Params, v string) error {
		backing(p).Filesystem = v
		return nonEmpty(v)
	},
	BackingPath: func(p *Params, v string) error {
		backing(p).Path = cachev1alpha1.AbsolutePath(v)
		return absolute(v)
	},
	Type: func(p *Params, v string) error {
		p.Spec.Type = cachev1alpha1.CacheType(v)
		return oneOf(v, string(cachev1alpha1.CacheTypeCache), string(cachev1alpha1.CacheTypeScratch))
	},
	AccessMode: func(p *Params, v string) error {
		p.Spec.AccessMode = cachev1alpha1.AccessMode(v)
		return oneOf(v, string(cachev1alpha1.AccessModeStriped), string(cachev1alpha1.AccessModeLoadBalanced))
	},
	MaxFileSize:           func(p *Params, v string) error { return quantity(&limits(p).MaxFileSize, v) },
	MaxFiles:              func(p *Params, v string) error { return int64Val(&limits(p).MaxFiles, v) },
	WriteWindowMultiplier: func(p *Params, v string) error { return int32Val(&window(p).Multiplier, v, 1000) },
	WriteWindowLength:     func(p *Params, v string) error { return duration(&window(p).Length, v) },
	WriteBackThreads:      func(p *Params, v string) error { return int32Val(&writeBack(p).Threads, v, 64) },
	DirtyHighWatermark:    func(p *Params, v string) error { return percent(&writeBack(p).DirtyHighWatermark, v) },
	DirtyLowWatermark:     func(p *Params, v string) error { return percent(&writeBack(p).DirtyLowWatermark, v) },
	Durability: func(p *Params, v string) error {
		writeBack(p).Durability = cachev1alpha1.Durability(v)
		return oneOf(v, string(cachev1alpha1.DurabilityCache), string(cachev1alpha1.DurabilityBacking))
	},
	EvictionHighWatermark: func(p *Params, v string) error { return percent(&eviction(p).HighWatermark, v) },
	EvictionLowWatermark:  func(p *Params, v string) error { return percent(&eviction(p).LowWatermark, v) },
	Preload: func(p *Params, v string) error {
		paths, err := pathList(v)
		if err != nil {
			return err
		}
		for _, s := range paths {
			if err := absolute(s); err != nil {
				return err
			}
			p.Spec.Preload = append(p.Spec.Preload, cachev1alpha1.AbsolutePath(s))
		}
		return nil
	},
	RunAsUID: func(p *Params, v string) error { p.RunAsSet = true; return id(&p.Spec.RunAs.UID, v) },
	RunAsGID: func(p *Params, v string) error { return id(&p.Spec.RunAs.GID, v) },
	SupplementalGroups: func(p *Params, v string) error {
		for _, s := range strings.Split(v, ",") {
			var g int64
			if err := id(&g, strings.TrimSpace(s)); err != nil {
				return err
			}
			p.Spec.RunAs.SupplementalGroups = append(p.Spec.RunAs.SupplementalGroups, g)
		}
		return nil
	},
}

// pathList splits a list of paths: a JSON array of strings, for paths that
// hold commas or begin or end with spaces, or else paths separated by
// commas, each trimmed of spaces.
func pathList(v string) ([]string, error) {
	if !strings.HasPrefix(strings.TrimSpace(v), "[") {
		paths := strings.Split(v, ",")
		for i := range paths {
			paths[i] = strings.TrimSpace(paths[i])
		}
		return paths, nil
	}
	var paths []string
	if err := json.Unmarshal([]byte(v), &paths); err != nil {
		return nil, fmt.Errorf("a JSON array of paths: %w", err)
	}
	if len(paths) == 0 {
		return nil, errors.New("an empty JSON array: name at least one path")
	}
	return paths, nil
}

func backing(p *Params) *cachev1alpha1.BackingPath {
	if p.Spec.Backing == nil {
		p.Spec.Backing = &cachev1alpha1.BackingPath{}
	}
	return p.Spec.Backing
}

func limits(p *Params) *cachev1alpha1.Limits {
	if p.Spec.Limits == nil {
		p.Spec.Limits = &cachev1alpha1.Limits{}
	}
	return p.Spec.Limits
}

func window(p *Params) *cachev1alpha1.WriteWindow {
	l := limits(p)
	if l.WriteWindow == nil {
		l.WriteWindow = &cachev1alpha1.WriteWindow{}
	}
	return l.WriteWindow
}

func writeBack(p *Params) *cachev1alpha1.WriteBack {
	if p.Spec.WriteBack == nil {
		p.Spec.WriteBack = &cachev1alpha1.WriteBack{}
	}
	return p.Spec.WriteBack
}

func eviction(p *Params) *cachev1alpha1.Eviction {
	if p.Spec.Eviction == nil {
		p.Spec.Eviction = &cachev1alpha1.Eviction{}
	}
	return p.Spec.Eviction
}

func nonEmpty(v string) error {
	if v == "" {
		return fmt.Errorf("must not be empty")
	}
	return nil
}

func absolute(v string) error {
	if !path.IsAbs(v) || path.Clean(v) != v {
		return fmt.Errorf("want an absolute, clean path")
	}
	return nil
}

func oneOf(v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return fmt.Errorf("want one of %s", strings.Join(allowed, ", "))
}

func quantity(dst **resource.Quantity, v string) error {
	q, err := resource.ParseQuantity(v)
	if err != nil || q.Sign() <= 0 {
		return fmt.Errorf("want a positive quantity such as 10Gi")
	}
	*dst = &q
	return nil
}

func int64Val(dst **int64, v string) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return fmt.Errorf("want a positive integer")
	}
	*dst = &n
	return nil
}

// int32Val takes an integer from 1 to limit, the range the CacheInstance
// schema allows the field.
func int32Val(dst **int32, v string, limit int64) error {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 1 || n > limit {
		return fmt.Errorf("want an integer from 1 to %d", limit)
	}
	n32 := int32(n)
	*dst = &n32
	return nil
}

func percent(dst **int32, v string) error {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 1 || n > 100 {
		return fmt.Errorf("want a percentage from 1 to 100")
	}
	n32 := int32(n)
	*dst = &n32
	return nil
}

func duration(dst **metav1.Duration, v string) error {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return fmt.Errorf("want a positive duration such as 24h")
	}
	*dst = &metav1.Duration{Duration: d}
	return nil
}

func id(dst *int64, v string) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > 4294967294 {
		return fmt.Errorf("want a POSIX id from 0 to 4294967294")
	}
	*dst = n
	return nil
}
