package cacheinstance

import (
	"context"
	"fmt"
	"strconv"

	ctrl "sigs.k8s.io/controller-runtime"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/cacheserver/control"
)

// Tunables are the knobs of an instance that its servers take live. Unset
// knobs are zero, the server's default: a knob taken out of the spec goes
// back to its default on running servers too, as on servers started from
// the new pod spec, instead of staying as it was (a limit removed from the
// spec would go on failing writes). The write window's length is the
// exception and stays nil: servers of earlier releases refuse a zero
// length, and a length taken out only lengthens the window back to its
// default when the server restarts.
func Tunables(inst *cachev1alpha1.CacheInstance) control.Tunables {
	zero, zero64, zeroF := 0, int64(0), float64(0)
	t := control.Tunables{
		WriteBackThreads: &zero, DirtyHighWatermarkPercent: &zero, DirtyLowWatermarkPercent: &zero,
		EvictHighWatermarkPercent: &zero, EvictLowWatermarkPercent: &zero,
		MaxFileSize: &zero64, MaxFiles: &zero64, WriteWindowMultiplier: &zeroF,
	}
	set := func(dst **int, v *int32) {
		if v != nil {
			*dst = intPtr(v)
		}
	}
	if w := inst.Spec.WriteBack; w != nil {
		set(&t.WriteBackThreads, w.Threads)
		set(&t.DirtyHighWatermarkPercent, w.DirtyHighWatermark)
		set(&t.DirtyLowWatermarkPercent, w.DirtyLowWatermark)
	}
	if e := inst.Spec.Eviction; e != nil {
		set(&t.EvictHighWatermarkPercent, e.HighWatermark)
		set(&t.EvictLowWatermarkPercent, e.LowWatermark)
	}
	if l := inst.Spec.Limits; l != nil {
		if l.MaxFileSize != nil {
			t.MaxFileSize = ptrTo(l.MaxFileSize.Value())
		}
		if l.MaxFiles != nil {
			t.MaxFiles = l.MaxFiles
		}
		if w := l.WriteWindow; w != nil {
			if w.Multiplier != nil {
				t.WriteWindowMultiplier = ptrTo(float64(*w.Multiplier))
			}
			if w.Length != nil {
				t.WriteWindowSeconds = ptrTo(int64(w.Length.Seconds()))
			}
		}
	}
	return t
}

func intPtr(v *int32) *int {
	if v == nil {
		return nil
	}
	return ptrTo(int(*v))
}

// tunableArgs are the server flags for the set tunables, so that a server
// (re)started from its pod spec begins with the knobs of that spec. Zero is
// the flags' default and is left out.
func tunableArgs(t control.Tunables) []string {
	var args []string
	add := func(flag string, v *int) {
		if v != nil && *v != 0 {
			args = append(args, flag+"="+strconv.Itoa(*v))
		}
	}
	add("--writeback-threads", t.WriteBackThreads)
	add("--dirty-high", t.DirtyHighWatermarkPercent)
	add("--dirty-low", t.DirtyLowWatermarkPercent)
	add("--evict-high", t.EvictHighWatermarkPercent)
	add("--evict-low", t.EvictLowWatermarkPercent)
	if t.MaxFileSize != nil && *t.MaxFileSize != 0 {
		args = append(args, "--max-file-size="+strconv.FormatInt(*t.MaxFileSize, 10))
	}
	if t.MaxFiles != nil && *t.MaxFiles != 0 {
		args = append(args, "--max-files="+strconv.FormatInt(*t.MaxFiles, 10))
	}
	if t.WriteWindowMultiplier != nil && *t.WriteWindowMultiplier != 0 {
		args = append(args, "--write-window-multiplier="+strconv.FormatFloat(*t.WriteWindowMultiplier, 'g', -1, 64))
	}
	if t.WriteWindowSeconds != nil && *t.WriteWindowSeconds != 0 {
		args = append(args, "--write-window-length="+strconv.FormatInt(*t.WriteWindowSeconds, 10)+"s")
	}
	return args
}

// pushTunables sends the instance's knobs to every ready server, on every
// pass: a server restarted from an older pod spec gets the current knobs
// within one stats interval, and a change reaches running servers without
// a restart. The call is idempotent.
func (r *Reconciler) pushTunables(ctx context.Context, s *scope) (ctrl.Result, error) {
	t := Tunables(s.inst)
	for i, srv := range s.inst.Status.Servers {
		if !srv.Ready {
			continue
		}
		c, err := r.client(ctx, s, i)
		if err != nil {
			return ctrl.Result{}, err
		}
		cctx, cancel := context.WithTimeout(ctx, r.Options.CallTimeout)
		err = c.SetTunables(cctx, t)
		cancel()
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("setting the knobs of %s: %w", srv.Name, err)
		}
	}
	return ctrl.Result{}, nil
}
