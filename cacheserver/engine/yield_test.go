package engine

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/backing"
)

// jobReads reads p through the engine every millisecond, as a job does,
// until the returned function is called.
func jobReads(t *testing.T, r *rig, p string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, 4096)
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := r.e.ReadAt(context.Background(), p, buf, 0); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

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
	stop := jobReads(t, r, "job")
	err := r.e.FlushPath(ctx, "busy")
	stop()
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

func syncYields(e *Engine) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.st.syncYields
}

// TestSyncerYieldsToJobIOUnlessACallWaits proves that the fsyncs of
// write-back pause while a job reads during a flush hint, and that a flush
// a job's call waits for (EvictPath, as rename and Sync with Durability
// Backing) still writes everything back meanwhile.
func TestSyncerYieldsToJobIOUnlessACallWaits(t *testing.T) {
	const es = 64 << 10
	r := newRig(t, es, 64, nil)
	r.faulty.SetLatency(backing.OpSync, 2*time.Millisecond)
	ctx := context.Background()
	r.writeBacking("job", bytes.Repeat([]byte("j"), es))
	for _, p := range []string{"hint", "urgent"} {
		for i := range int64(4) {
			r.write(fmt.Sprintf("%s/%d", p, i), 0, bytes.Repeat([]byte(p[:1]), es))
		}
	}
	defer jobReads(t, r, "job")()
	if err := r.e.FlushPath(ctx, "hint"); err != nil {
		t.Fatal(err)
	}
	if syncYields(r.e) == 0 {
		t.Fatal("the syncer never paused for job I/O during a flush hint")
	}
	if err := r.e.EvictPath(ctx, "urgent"); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if got := r.backingFile(fmt.Sprintf("urgent/%d", i)); !bytes.Equal(got, bytes.Repeat([]byte("u"), es)) {
			t.Fatalf("urgent/%d was not written back", i)
		}
	}
}

// TestUrgentFlushEndsTheSyncersPause: while a job does I/O, the syncer
// does not begin a pause when a flush that a job's call waits for runs,
// and one that began ends when such a flush begins.
func TestUrgentFlushEndsTheSyncersPause(t *testing.T) {
	r := newRig(t, 4096, 8, nil)
	e := r.e
	e.mu.Lock()
	e.lastIO = time.Now().Add(time.Hour) // a job's I/O, for as long as the test runs
	e.beginUrgentLocked()
	e.mu.Unlock()
	e.syncerYield(maxYield)
	if n := syncYields(e); n != 0 {
		t.Fatalf("the syncer paused %d times while an urgent flush ran", n)
	}
	e.mu.Lock()
	e.urgent--
	e.mu.Unlock()

	done := make(chan struct{})
	go func() {
		e.syncerYield(maxYield)
		close(done)
	}()
	waitFor(t, func() bool { return syncYields(e) == 1 })
	e.mu.Lock()
	e.beginUrgentLocked()
	e.mu.Unlock()
	<-done
	e.mu.Lock()
	cut := e.st.syncYieldsCut
	e.urgent--
	e.mu.Unlock()
	if cut != 1 {
		t.Fatal("the pause ran to its end although an urgent flush began")
	}
}
