package policy

import (
	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// Default fills the knobs an instance leaves unset from the pool's defaults
// (and, for maxFileSize and maxFiles without a default, from its ceilings).
// It never touches a field the user set, and never sets teardown.policy:
// Discard must be asked for.
func Default(inst *cachev1alpha1.CacheInstance, pool *cachev1alpha1.CachePool) {
	DefaultKnobs(inst, pool)
	d := pool.Spec.Defaults
	s := &inst.Spec
	if d != nil && d.Teardown != nil && d.Teardown.Timeout != nil {
		if s.Teardown == nil {
			s.Teardown = &cachev1alpha1.Teardown{}
		}
		if s.Teardown.Timeout == nil {
			t := *d.Teardown.Timeout
			s.Teardown.Timeout = &t
		}
	}
}

// DefaultKnobs is Default without the teardown timeout: it fills the
// write-back, eviction and limit knobs the instance leaves unset.
func DefaultKnobs(inst *cachev1alpha1.CacheInstance, pool *cachev1alpha1.CachePool) {
	d := pool.Spec.Defaults
	if d == nil {
		d = &cachev1alpha1.InstanceDefaults{}
	}
	s := &inst.Spec
	if d.WriteBack != nil {
		defaultWriteBack(s, d.WriteBack)
	}
	if d.Eviction != nil {
		defaultEviction(s, d.Eviction)
	}
	defaultLimits(s, d.Limits, pool.Spec.Ceilings)
}

func defaultWriteBack(s *cachev1alpha1.CacheInstanceSpec, d *cachev1alpha1.WriteBackDefaults) {
	if s.WriteBack == nil {
		s.WriteBack = &cachev1alpha1.WriteBack{}
	}
	w := s.WriteBack
	if w.Threads == nil && d.Threads > 0 {
		w.Threads = ptr(d.Threads)
	}
	// The watermarks go together: the user sets both or neither.
	if w.DirtyHighWatermark == nil && w.DirtyLowWatermark == nil && d.DirtyHighWatermark > 0 && d.DirtyLowWatermark > 0 {
		w.DirtyHighWatermark, w.DirtyLowWatermark = ptr(d.DirtyHighWatermark), ptr(d.DirtyLowWatermark)
	}
}

func defaultEviction(s *cachev1alpha1.CacheInstanceSpec, d *cachev1alpha1.EvictionDefaults) {
	if s.Eviction == nil {
		s.Eviction = &cachev1alpha1.Eviction{}
	}
	e := s.Eviction
	if e.HighWatermark == nil && e.LowWatermark == nil && d.HighWatermark > 0 && d.LowWatermark > 0 {
		e.HighWatermark, e.LowWatermark = ptr(d.HighWatermark), ptr(d.LowWatermark)
	}
}

func defaultLimits(s *cachev1alpha1.CacheInstanceSpec, d *cachev1alpha1.LimitsDefaults, c *cachev1alpha1.InstanceCeilings) {
	if d == nil {
		d = &cachev1alpha1.LimitsDefaults{}
	}
	if c == nil {
		c = &cachev1alpha1.InstanceCeilings{}
	}
	if s.Limits == nil {
		s.Limits = &cachev1alpha1.Limits{}
	}
	l := s.Limits
	if l.MaxFileSize == nil {
		if q := firstSet(d.MaxFileSize, c.MaxFileSize); q != nil {
			v := q.DeepCopy()
			l.MaxFileSize = &v
		}
	}
	if l.MaxFiles == nil {
		if n := firstSet(d.MaxFiles, c.MaxFiles); n != nil {
			l.MaxFiles = ptr(*n)
		}
	}
	defaultWriteWindow(l, d.WriteWindow)
}

func defaultWriteWindow(l *cachev1alpha1.Limits, d *cachev1alpha1.WriteWindowDefaults) {
	if d == nil {
		return
	}
	if l.WriteWindow == nil {
		l.WriteWindow = &cachev1alpha1.WriteWindow{}
	}
	if l.WriteWindow.Multiplier == nil && d.Multiplier > 0 {
		l.WriteWindow.Multiplier = ptr(d.Multiplier)
	}
	if l.WriteWindow.Length == nil && d.Length != nil {
		v := *d.Length
		l.WriteWindow.Length = &v
	}
}

func firstSet[T any](vs ...*T) *T {
	for _, v := range vs {
		if v != nil {
			return v
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
