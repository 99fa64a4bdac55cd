package directive

import (
	"fmt"
	"strings"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// jobdw translates "#DW jobdw" into the job's instance spec.
func jobdw(req *Request, opts map[string]string) string {
	if req.Job != nil {
		return "a second jobdw: a job has one job instance"
	}
	if bad := known(opts, []string{"type", "capacity"}, "access_mode", "pfs", "pool", "filesystem",
		"MFS", "write_window_multiplier", "write_window_length", "sync_to_pfs"); bad != "" {
		return bad
	}
	spec := &cachev1alpha1.CacheInstanceSpec{Pool: opts["pool"]}
	for _, step := range []func(*cachev1alpha1.CacheInstanceSpec, map[string]string) string{
		setType, setAccessMode, setCapacity, setLimits, setDurability,
	} {
		if bad := step(spec, opts); bad != "" {
			return bad
		}
	}
	req.Job = spec
	return ""
}

func setType(spec *cachev1alpha1.CacheInstanceSpec, opts map[string]string) string {
	switch opts["type"] {
	case "cache":
		spec.Type = cachev1alpha1.CacheTypeCache
		if opts["pfs"] == "" {
			return "type=cache needs pfs=, the path to cache"
		}
		if bad := absPath("pfs", opts["pfs"]); bad != "" {
			return bad
		}
		spec.Backing = &cachev1alpha1.BackingPath{Filesystem: opts["filesystem"], Path: cachev1alpha1.AbsolutePath(opts["pfs"])}
	case "scratch":
		spec.Type = cachev1alpha1.CacheTypeScratch
		if opts["pfs"] != "" {
			return "type=scratch has no pfs="
		}
	default:
		return fmt.Sprintf("type %q is not cache or scratch", opts["type"])
	}
	return ""
}

func setAccessMode(spec *cachev1alpha1.CacheInstanceSpec, opts map[string]string) string {
	switch opts["access_mode"] {
	case "", "striped":
		spec.AccessMode = cachev1alpha1.AccessModeStriped
	case "ldbalance":
		if spec.Type != cachev1alpha1.CacheTypeCache {
			return "access_mode=ldbalance needs type=cache"
		}
		spec.AccessMode = cachev1alpha1.AccessModeLoadBalanced
	default:
		return fmt.Sprintf("access_mode %q is not supported (want striped or ldbalance)", opts["access_mode"])
	}
	return ""
}

func setCapacity(spec *cachev1alpha1.CacheInstanceSpec, opts map[string]string) string {
	q, bad := size("capacity", opts["capacity"])
	spec.Capacity = q
	return bad
}

func setLimits(spec *cachev1alpha1.CacheInstanceSpec, opts map[string]string) string {
	l := &cachev1alpha1.Limits{}
	if v, ok := opts["MFS"]; ok {
		q, bad := size("MFS", v)
		if bad != "" {
			return bad
		}
		l.MaxFileSize = &q
	}
	if v, ok := opts["write_window_multiplier"]; ok {
		n, bad := positiveInt("write_window_multiplier", v, 1000)
		if bad != "" {
			return bad
		}
		m := int32(n)
		l.WriteWindow = &cachev1alpha1.WriteWindow{Multiplier: &m}
	}
	if v, ok := opts["write_window_length"]; ok {
		d, bad := seconds("write_window_length", v)
		if bad != "" {
			return bad
		}
		if l.WriteWindow == nil {
			l.WriteWindow = &cachev1alpha1.WriteWindow{}
		}
		l.WriteWindow.Length = d
	}
	if l.MaxFileSize != nil || l.WriteWindow != nil {
		spec.Limits = l
	}
	return ""
}

func setDurability(spec *cachev1alpha1.CacheInstanceSpec, opts map[string]string) string {
	switch strings.ToLower(opts["sync_to_pfs"]) {
	case "", "no":
	case "yes":
		if spec.Type != cachev1alpha1.CacheTypeCache {
			return "sync_to_pfs=yes needs type=cache"
		}
		spec.WriteBack = &cachev1alpha1.WriteBack{Durability: cachev1alpha1.DurabilityBacking}
	default:
		return fmt.Sprintf("sync_to_pfs %q is not yes or no", opts["sync_to_pfs"])
	}
	return ""
}
