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
// knobs are nil and stay as the server has them.
func Tunables(inst *cachev1alpha1.CacheInstance) control.Tunables {
	var t control.Tunables
	if w := inst.Spec.WriteBack; w != nil {
		t.WriteBackThreads = intPtr(w.Threads)
		t.DirtyHighWatermarkPercent = intPtr(w.DirtyHighWatermark)
		t.DirtyLowWatermarkPercent = intPtr(w.DirtyLowWatermark)
	}
	if e := inst.Spec.Eviction; e != nil {
		t.EvictHighWatermarkPercent = intPtr(e.HighWatermark)
		t.EvictLowWatermarkPercent = intPtr(e.LowWatermark)
	}
	if l := inst.Spec.Limits; l != nil {
		if l.MaxFileSize != nil {
			t.MaxFileSize = ptrTo(l.MaxFileSize.Value())
		}
		t.MaxFiles = l.MaxFiles
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
// (re)started from its pod spec begins with the knobs of that spec.
func tunableArgs(t control.Tunables) []string {
	var args []string
	add := func(flag string, v *int) {
		if v != nil {
			args = append(args, flag+"="+strconv.Itoa(*v))
		}
	}
	add("--writeback-threads", t.WriteBackThreads)
	add("--dirty-high", t.DirtyHighWatermarkPercent)
	add("--dirty-low", t.DirtyLowWatermarkPercent)
	add("--evict-high", t.EvictHighWatermarkPercent)
	add("--evict-low", t.EvictLowWatermarkPercent)
	if t.MaxFileSize != nil {
		args = append(args, "--max-file-size="+strconv.FormatInt(*t.MaxFileSize, 10))
	}
	if t.MaxFiles != nil {
		args = append(args, "--max-files="+strconv.FormatInt(*t.MaxFiles, 10))
	}
	if t.WriteWindowMultiplier != nil {
		args = append(args, "--write-window-multiplier="+strconv.FormatFloat(*t.WriteWindowMultiplier, 'g', -1, 64))
	}
	if t.WriteWindowSeconds != nil {
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

// client returns a control API client of server i.
func (r *Reconciler) client(ctx context.Context, s *scope, i int) (*control.Client, error) {
	pod := s.pods[i]
	if pod == nil {
		return nil, fmt.Errorf("server %d has no pod", i)
	}
	addr, err := r.Options.Resolver(ctx, pod)
	if err != nil {
		return nil, fmt.Errorf("finding server %d: %w", i, err)
	}
	secret, err := r.controlSecret(ctx, s.inst)
	if err != nil {
		return nil, err
	}
	return control.NewClient(addr, secret, nil), nil
}
