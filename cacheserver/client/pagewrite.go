package client

import (
	"context"
	"time"

	"github.com/burstcache/burstcache/cacheserver/namespace"
)

// pageRetryFirst and pageRetryMax are the first and the longest pause
// between attempts of a write of cached pages whose server cannot be
// reached; pageWaitReport is how often the wait is logged again, so that
// an admin looking for why a pod hangs in close or fsync finds it.
var (
	pageRetryFirst = 50 * time.Millisecond
	pageRetryMax   = 2 * time.Second
	pageWaitReport = time.Minute
)

// persist runs call, a step of the write of path that goes to server, and,
// for a write of pages of the kernel's page cache
// (namespace.IsFromPageCache), runs it again while the server cannot be
// reached or its connection breaks, until it answers, the client closes,
// or the grace of Stopping ends.
// The job was told long ago that those bytes were written, and the kernel
// drops the pages of a write that fails: waiting for a server that
// restarts (killed, its pod evicted, upgraded) keeps them, as a hard NFS
// mount does. Sending the write again is safe: it carries the same bytes
// to the same place, and the kernel does not write the same pages again
// while this write is under way.
func (f *FS) persist(ctx context.Context, server int, path string, call func() error) error {
	err := call()
	if !unreachable(err) || !namespace.IsFromPageCache(ctx) {
		return err
	}
	f.log.Warn("Waiting for a server to take written-back pages", "server", server, "path", path, "err", err)
	start, reported := time.Now(), time.Now()
	pause := pageRetryFirst
	for unreachable(err) {
		select {
		case <-f.stop:
			return err
		case <-f.giveUp:
			return err
		case <-time.After(pause):
		}
		pause = min(2*pause, pageRetryMax)
		err = call()
		if unreachable(err) && time.Since(reported) >= pageWaitReport {
			reported = time.Now()
			f.log.Warn("Still waiting for a server to take written-back pages", "server", server, "path", path,
				"waited", time.Since(start).Round(time.Second), "err", err)
		}
	}
	if err == nil {
		f.log.Info("Server took written-back pages", "server", server, "path", path, "waited", time.Since(start).Round(time.Millisecond))
	}
	return err
}

// Stopping tells the client that its mount is stopping: writes of cached
// pages that wait for a server give up grace later, so that the unmount,
// which waits for them, ends. The kernel then drops those pages, and the
// mount reports them (fusefs.Server.Dropped). Only the first call counts.
func (f *FS) Stopping(grace time.Duration) {
	f.stopping.Do(func() {
		time.AfterFunc(grace, func() { close(f.giveUp) })
	})
}
