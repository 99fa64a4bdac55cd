package engine

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/backing"
)

var errInjected = errors.New("injected backing failure")

// TestWriteBackSurvivesBackingFaults breaks and slows the backing store
// during write-back: nothing is lost, the error shows in Stats and Flush, and
// write-back completes once the fault clears.
func TestWriteBackSurvivesBackingFaults(t *testing.T) {
	r := newRig(t, 4096, 64, func(c *Config) {
		c.Tunables = Tunables{WriteBackThreads: 4, DirtyHigh: 1, DirtyLow: 0}
	})
	ctx := context.Background()
	r.faulty.SetError(backing.OpWriteAt, errInjected)
	want := map[string][]byte{}
	for i, p := range []string{"a", "b/c", "d"} {
		want[p] = bytes.Repeat([]byte{byte('a' + i)}, 10000+i*3000)
		r.write(p, 0, want[p])
	}
	waitFor(t, func() bool { return r.e.Stats().WriteBackErrors >= 3 })
	s := r.e.Stats()
	if !strings.Contains(s.LastWriteBackError, errInjected.Error()) || s.DirtyBytes != 10000+13000+16000 {
		t.Fatalf("stats during the fault: %+v", s)
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := r.e.Flush(fctx); !errors.Is(err, ErrDirtyLeft) || !errors.Is(err, errInjected) {
		t.Fatalf("Flush during the fault = %v, want ErrDirtyLeft wrapping the backing error", err)
	}
	if s := r.e.Stats(); s.WriteBacks != 0 || !s.WriteBackFailing || s.WriteBackRefused {
		t.Fatalf("after failed write-backs: WriteBacks %d, WriteBackFailing %v, WriteBackRefused %v (an error that is no refusal)", s.WriteBacks, s.WriteBackFailing, s.WriteBackRefused)
	}
	r.faulty.SetError(backing.OpWriteAt, nil)
	const latency = 5 * time.Millisecond
	r.faulty.SetLatency(backing.OpWriteAt, latency)
	if err := r.e.Flush(ctx); err != nil {
		t.Fatalf("Flush after the fault cleared: %v", err)
	}
	// 3, 4 and 4 extents of 4 KiB, each written back once.
	if s := r.e.Stats(); s.WriteBacks != 11 || s.WriteBackTime < 11*latency {
		t.Fatalf("after writing back 11 extents to a store %v away: WriteBacks %d taking %v", latency, s.WriteBacks, s.WriteBackTime)
	}
	for p, data := range want {
		if got := r.backingFile(p); !bytes.Equal(got, data) {
			t.Errorf("backing %s: %d bytes, want %d", p, len(got), len(data))
		}
	}
}

// TestReadFaultSurfacesAndRecovers fails copy-up, then lets it succeed,
// through memory and in the kernel.
func TestReadFaultSurfacesAndRecovers(t *testing.T) {
	for name, tc := range map[string]struct {
		memory bool
		op     backing.Op
	}{
		"through memory": {memory: true, op: backing.OpReadAt},
		"in the kernel":  {op: backing.OpCopyRange},
	} {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, 4096, 8, func(c *Config) {
				if tc.memory {
					c.Backing = memoryOnly(c.Backing)
				}
			})
			r.writeBacking("f", []byte("payload"))
			r.faulty.SetError(tc.op, errInjected)
			b := make([]byte, 7)
			if _, err := r.e.ReadAt(context.Background(), "f", b, 0); !errors.Is(err, errInjected) {
				t.Fatalf("read during the fault: %v", err)
			}
			if s := r.e.Stats(); s.CopyUps != 0 {
				t.Fatalf("a failed copy-up counts in CopyUps: %d", s.CopyUps)
			}
			r.faulty.SetError(tc.op, nil)
			const latency = 5 * time.Millisecond
			r.faulty.SetLatency(tc.op, latency)
			if _, err := r.e.ReadAt(context.Background(), "f", b, 0); err != nil || string(b) != "payload" {
				t.Fatalf("read after the fault: %q, %v", b, err)
			}
			if s := r.e.Stats(); s.CopyUps != 1 || s.CopyUpTime < latency {
				t.Fatalf("after one copy-up from a store %v away: CopyUps %d taking %v", latency, s.CopyUps, s.CopyUpTime)
			}
		})
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
