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
	r.faulty.SetError(backing.OpWriteAt, nil)
	r.faulty.SetLatency(backing.OpWriteAt, 5*time.Millisecond)
	if err := r.e.Flush(ctx); err != nil {
		t.Fatalf("Flush after the fault cleared: %v", err)
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
			r.faulty.SetError(tc.op, nil)
			if _, err := r.e.ReadAt(context.Background(), "f", b, 0); err != nil || string(b) != "payload" {
				t.Fatalf("read after the fault: %q, %v", b, err)
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
