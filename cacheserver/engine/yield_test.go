package engine

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/backing"
)

func yields(e *Engine) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.st.yields
}

// TestFlushPathYieldsToJobIO proves that a flush hint pauses its
// write-back while a job reads, and runs unpaused when no job does I/O.
func TestFlushPathYieldsToJobIO(t *testing.T) {
	const es = 64 << 10
	r := newRig(t, es, 64, nil)
	r.faulty.SetLatency(backing.OpWriteAt, time.Millisecond)
	ctx := context.Background()
	r.writeBacking("job", bytes.Repeat([]byte("j"), es))
	for i := range int64(8) {
		r.write("quiet/f", i*es, bytes.Repeat([]byte("q"), es))
	}
	time.Sleep(2 * jobIOWindow) // the writes above are old news
	if err := r.e.FlushPath(ctx, "quiet"); err != nil {
		t.Fatal(err)
	}
	if n := yields(r.e); n != 0 {
		t.Fatalf("a flush with no job I/O paused %d times", n)
	}

	for i := range int64(8) {
		r.write("busy/f", i*es, bytes.Repeat([]byte("b"), es))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, 4096)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := r.e.ReadAt(ctx, "job", buf, 0); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	})
	err := r.e.FlushPath(ctx, "busy")
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if n := yields(r.e); n == 0 {
		t.Fatal("a flush during job I/O never paused")
	}
	if got := r.backingFile("busy/f"); !bytes.Equal(got, bytes.Repeat([]byte("b"), 8*es)) {
		t.Fatal("the flush did not write everything back")
	}
}
