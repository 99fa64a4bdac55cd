package client

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/server/servertest"
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

// TestPageWritesReportTheirWait checks that a write of cached pages that
// waits for its server says so in the log, again while it waits, and when
// it ends: a pod hanging in close or fsync shows nothing else.
func TestPageWritesReportTheirWait(t *testing.T) {
	defer func(d time.Duration) { pageWaitReport = d }(pageWaitReport)
	pageWaitReport = 100 * time.Millisecond
	in := servertest.Start(t, t.TempDir(), servertest.Options{Servers: 1, ExtentSize: testExtent, Secret: "k"})
	log := &lockedBuffer{}
	f := connectWith(t, Options{Servers: in.Data, Secret: []byte("k"), ExtentSize: testExtent,
		Log: slog.New(slog.NewTextHandler(log, nil))})
	create(t, f, "f")
	in.Stop(t, 0)
	done := make(chan error, 1)
	go func() {
		_, err := f.WriteAt(namespace.FromPageCache(context.Background()), "f", randomData(testExtent), 0)
		done <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(log.String(), "Still waiting"); {
		if time.Now().After(deadline) {
			t.Fatalf("no reminder of the wait in the log:\n%s", log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	in.Restart(t, 0)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Waiting for a server", "Server took written-back pages"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
}

// lockedBuffer is a bytes.Buffer that a logger may write to while a test
// reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
