package engine

import "time"

const windowBuckets = 64

// window sums bytes written over a sliding time window, in buckets of
// 1/64 of its length, so the sum lags the exact one by at most a bucket.
type window struct {
	length time.Duration
	bytes  [windowBuckets]int64
	epoch  [windowBuckets]int64
}

func (w *window) width() int64 { return max(int64(w.length)/windowBuckets, 1) }

func (w *window) add(now time.Time, n int64) {
	ep := now.UnixNano() / w.width()
	i := ep % windowBuckets
	if w.epoch[i] != ep {
		w.epoch[i], w.bytes[i] = ep, 0
	}
	w.bytes[i] += n
}

func (w *window) sum(now time.Time) int64 {
	ep := now.UnixNano() / w.width()
	var s int64
	for i := range w.bytes {
		if ep-w.epoch[i] < windowBuckets {
			s += w.bytes[i]
		}
	}
	return s
}

// limit returns the byte limit of the window, or -1 when disabled.
func (e *Engine) windowLimitLocked() int64 {
	if e.tun.WriteWindow.Multiplier < 0 {
		return -1
	}
	return int64(e.tun.WriteWindow.Multiplier * float64(e.slab.Slots()*e.es))
}

// readOnlyLocked reports whether the write window is exhausted.
func (e *Engine) readOnlyLocked() bool {
	l := e.windowLimitLocked()
	return l >= 0 && e.window.sum(e.cfg.Clock.Now()) >= l
}

// countDeviceWriteLocked adds n bytes written to the cache device.
func (e *Engine) countDeviceWriteLocked(n int64) {
	e.window.add(e.cfg.Clock.Now(), n)
}
