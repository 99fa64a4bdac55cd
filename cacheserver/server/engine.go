package server

import (
	"sync"
	"syscall"
	"time"

	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/cacheserver/engine"
)

func init() {
	extraErrnos = append(extraErrnos, []struct {
		err   error
		errno syscall.Errno
	}{
		{engine.ErrFileTooLarge, syscall.EFBIG},
		{engine.ErrTooManyFiles, syscall.EDQUOT},
		{engine.ErrReadOnly, syscall.EROFS},
		{engine.ErrCacheDevice, syscall.EIO},
		{engine.ErrInvalid, syscall.EINVAL},
		{engine.ErrClosed, syscall.ESHUTDOWN},
	}...)
}

// EngineCache adapts a cache engine to the Cache the server serves. tun is
// the engine's configured tunables, which control.Tunables change field by
// field.
func EngineCache(e *engine.Engine, tun engine.Tunables) Cache {
	return &engineCache{Engine: e, tun: tun}
}

type engineCache struct {
	*engine.Engine
	mu  sync.Mutex
	tun engine.Tunables
}

// Stats converts the engine's statistics.
func (c *engineCache) Stats() control.Stats {
	s := c.Engine.Stats()
	return control.Stats{
		CapacityBytes: s.Capacity, CachedBytes: s.CachedBytes, DirtyBytes: s.DirtyBytes,
		Hits: uint64(s.Hits), Misses: uint64(s.Misses),
		CopyUpBytes: s.CopyUpBytes, WriteBackBytes: s.WriteBackBytes,
		CopyUps: uint64(s.CopyUps), CopyUpSeconds: s.CopyUpTime.Seconds(),
		WriteBacks: uint64(s.WriteBacks), WriteBackSeconds: s.WriteBackTime.Seconds(),
		WriteBackLagSeconds: s.WriteBackLag.Seconds(), Files: s.Files,
		WriteBackErrors: uint64(s.WriteBackErrors), LastWriteBackError: s.LastWriteBackError, DoomedFiles: s.DoomedFiles,
		ReplacedFiles:    uint64(s.ReplacedFiles),
		WriteBackFailing: s.WriteBackFailing, WriteBackRefused: s.WriteBackRefused,
		BytesRead: s.BytesRead, BytesWritten: s.BytesWritten, Evictions: s.Evictions,
		WindowBytesWritten: s.WindowBytes, WindowLimitBytes: s.WindowLimit, ReadOnly: s.ReadOnly,
		CacheDeviceError: s.DeviceError, IndexError: s.IndexError, IndexCommitFailures: uint64(s.IndexCommitFailures),
	}
}

// SetTunables changes the fields of t that are set, keeping the others.
func (c *engineCache) SetTunables(t control.Tunables) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := c.tun
	set := func(dst *int, src *int) {
		if src != nil {
			*dst = *src
		}
	}
	set(&next.DirtyHigh, t.DirtyHighWatermarkPercent)
	set(&next.DirtyLow, t.DirtyLowWatermarkPercent)
	set(&next.EvictHigh, t.EvictHighWatermarkPercent)
	set(&next.EvictLow, t.EvictLowWatermarkPercent)
	set(&next.WriteBackThreads, t.WriteBackThreads)
	if t.MaxFileSize != nil {
		next.MaxFileSize = *t.MaxFileSize
	}
	if t.MaxFiles != nil {
		next.MaxFiles = *t.MaxFiles
	}
	if t.WriteWindowMultiplier != nil {
		next.WriteWindow.Multiplier = *t.WriteWindowMultiplier
	}
	if t.WriteWindowSeconds != nil {
		if *t.WriteWindowSeconds < 0 {
			return syscall.EINVAL
		}
		next.WriteWindow.Length = time.Duration(*t.WriteWindowSeconds) * time.Second
	}
	for _, pct := range []int{next.DirtyHigh, next.DirtyLow, next.EvictHigh, next.EvictLow} {
		if pct < 0 || pct > 100 {
			return syscall.EINVAL
		}
	}
	c.tun = next
	c.Engine.SetTunables(next)
	return nil
}
