package client

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/namespace"
)

// TestPageWritesWaitForTheirServer stops the servers of a file: a write of
// cached pages, which the kernel would drop if it failed, waits until they
// are back and then lands, where a write whose caller sees the error fails
// at once.
func TestPageWritesWaitForTheirServer(t *testing.T) {
	f, in := setup(t, 2)
	create(t, f, "f")
	data := randomData(3 * testExtent)
	in.Stop(t, 0)
	in.Stop(t, 1)
	ctx := context.Background()
	if _, err := f.WriteAt(ctx, "f", data, 0); err == nil {
		t.Fatal("a write to stopped servers succeeded")
	}
	done := make(chan error, 1)
	go func() {
		_, err := f.WriteAt(namespace.FromPageCache(ctx), "f", data, 0)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a write of cached pages to stopped servers returned before they were back: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	in.Restart(t, 0)
	in.Restart(t, 1)
	if err := <-done; err != nil {
		t.Fatalf("a write of cached pages once the servers were back: %v", err)
	}
	if got := readAll(t, f, "f", len(data)); !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes that differ from the %d written", len(got), len(data))
	}
}

// TestPageWritesGiveUpWhenTheMountStops checks that a write of cached pages
// waiting for a stopped server ends when the client closes, or after the
// grace of Stopping, rather than keeping the mount from stopping.
func TestPageWritesGiveUpWhenTheMountStops(t *testing.T) {
	for name, stop := range map[string]func(*FS){
		"close":    func(f *FS) { _ = f.Close() },
		"stopping": func(f *FS) { f.Stopping(200 * time.Millisecond) },
	} {
		t.Run(name, func(t *testing.T) {
			f, in := setup(t, 1)
			create(t, f, "f")
			in.Stop(t, 0)
			done := make(chan error, 1)
			go func() {
				_, err := f.WriteAt(namespace.FromPageCache(context.Background()), "f", randomData(testExtent), 0)
				done <- err
			}()
			time.Sleep(100 * time.Millisecond)
			stop(f)
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("a write to a stopped server succeeded")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("a write of cached pages still waits for its server after the mount stopped")
			}
		})
	}
}
