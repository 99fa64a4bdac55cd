package client

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/server/servertest"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// TestBackgroundSizePushDoesNotUndoTruncate holds the size that the
// background pusher publishes on its way to the metadata server, truncates
// the file meanwhile, then lets the push through. Had the truncation gone
// ahead of the push, the push would land last and grow the file back to
// the written size; the truncation must wait for the push instead.
func TestBackgroundSizePushDoesNotUndoTruncate(t *testing.T) {
	const written, cut = 3 * testExtent, 100
	f, in, px := writeWithPushesHeld(t, "f", written)
	ctx := context.Background()
	push := waitHeld(t, px)
	if _ = push.args.Blob(); push.args.Int64() != written {
		t.Fatalf("the pusher published a size other than %d", written)
	}
	truncated := make(chan error, 1)
	go func() {
		_, err := f.SetAttr(ctx, "f", namespaceSize(cut))
		truncated <- err
	}()
	if waitForwarded(px, wire.OpTruncate, 300*time.Millisecond) {
		t.Error("the truncation reached the metadata server while a size push was in flight")
	}
	push.release(t)
	if err := <-truncated; err != nil {
		t.Fatal(err)
	}
	waitAnswered(t, px, push.id)
	checkSize(t, f, in, "f", cut)
}

// writeWithPushesHeld starts a server behind a proxy that holds back the
// durable size pushes of a client, and has that client write n bytes to a
// new file p.
func writeWithPushesHeld(t *testing.T, p string, n int) (*FS, *servertest.Instance, *holdProxy) {
	t.Helper()
	in := servertest.Start(t, t.TempDir(), servertest.Options{Servers: 1, ExtentSize: testExtent, Secret: "k"})
	px := startHoldProxy(t, in.Data[0], func(op wire.Op, args *wire.Decoder) bool {
		if op != wire.OpExtendSize {
			return false
		}
		// Path, size, then durable: a push, not a write's announcement.
		_, _ = args.Blob(), args.Int64()
		return args.Bool()
	})
	f := connect(t, &servertest.Instance{Data: []string{px.addr}})
	create(t, f, p)
	if _, err := f.WriteAt(context.Background(), p, randomData(n), 0); err != nil {
		t.Fatal(err)
	}
	return f, in, px
}

// waitHeld returns the next request the proxy held back on a connection
// that is still open: those held on connections it cut are gone.
func waitHeld(t *testing.T, px *holdProxy) heldRequest {
	t.Helper()
	timeout := time.After(10 * pushDelay)
	for {
		select {
		case h := <-px.held:
			if px.live(h) {
				return h
			}
		case <-timeout:
			t.Fatal("no size was published in the background")
			return heldRequest{}
		}
	}
}

// waitAnswered waits until the server has answered request id.
func waitAnswered(t *testing.T, px *holdProxy, id uint64) {
	t.Helper()
	for {
		select {
		case got := <-px.answered:
			if got == id {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the server did not answer the released request")
		}
	}
}

// waitForwarded waits up to d for a request of op to pass the proxy. A
// correct client sends none: the wait bounds how long the test gives a
// wrong one to show itself, and never makes a correct one fail.
func waitForwarded(px *holdProxy, op wire.Op, d time.Duration) bool {
	deadline := time.After(d)
	for {
		select {
		case got := <-px.forwarded:
			if got == op {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

// checkSize checks the size of p as f, a new client and the cache know it,
// and as the backing file holds it after a flush.
func checkSize(t *testing.T, f *FS, in *servertest.Instance, p string, want int64) {
	t.Helper()
	ctx := context.Background()
	for name, c := range map[string]*FS{"the truncating client": f, "a new client": connect(t, in)} {
		if a, err := c.GetAttr(ctx, p); err != nil || a.Size != want {
			t.Errorf("%s sees size %d (%v), want %d", name, a.Size, err, want)
		}
	}
	if size, err := in.Caches[0].Size(ctx, p); err != nil || size != want {
		t.Errorf("the cache holds size %d (%v), want %d", size, err, want)
	}
	flushAll(t, in)
	if fi, err := os.Stat(filepath.Join(in.Backing, p)); err != nil || fi.Size() != want {
		t.Errorf("the backing file after a flush: %v, %v; want %d bytes", fi, err, want)
	}
}

// TestFailedSizePushSurvivesAnotherClose fails a close's size push (the
// server goes away while the push is held) after another close forgot what
// the client knew of the file. The size is still the client's to publish:
// the next close must push it again.
func TestFailedSizePushSurvivesAnotherClose(t *testing.T) {
	const written = 3 * testExtent
	f, _, px := writeWithPushesHeld(t, "f", written)
	ctx := context.Background()
	closed := make(chan error, 1)
	go func() { closed <- f.Flush(ctx, "f") }()
	waitHeld(t, px)
	if err := f.Flush(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	f.Released("f")
	px.cut()
	if err := <-closed; err == nil {
		t.Fatal("a close whose size push found no server succeeded")
	}
	px.heal()
	go func() { closed <- f.Flush(ctx, "f") }()
	again := waitHeld(t, px)
	if _ = again.args.Blob(); again.args.Int64() != written {
		t.Fatalf("the next close published a size other than %d", written)
	}
	again.release(t)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// TestStaleAnswerDoesNotShrinkTheFile holds back the answer to a GetAttr,
// which the server gave before a write of the same client made the file
// longer, and lets it through once the write returned and a sync published
// its size. The answer knows nothing of the write: the client must still
// read the whole file, as the kernel keeps the size a write gave an inode
// against an older answer.
func TestStaleAnswerDoesNotShrinkTheFile(t *testing.T) {
	in := servertest.Start(t, t.TempDir(), servertest.Options{Servers: 1, ExtentSize: testExtent, Secret: "k"})
	px := startProxy(t, in.Data[0], nil, func(op wire.Op) bool { return op == wire.OpGetAttr })
	f := connect(t, &servertest.Instance{Data: []string{px.addr}})
	ctx := context.Background()
	create(t, f, "f")
	want := randomData(3 * testExtent)
	if _, err := f.WriteAt(ctx, "f", want[:testExtent], 0); err != nil {
		t.Fatal(err)
	}
	asked := make(chan error, 1)
	go func() {
		_, err := f.GetAttr(ctx, "f")
		asked <- err
	}()
	var stale heldRequest
	select {
	case stale = <-px.heldAnswers:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not answer the GetAttr")
	}
	if _, err := f.WriteAt(ctx, "f", want[testExtent:], testExtent); err != nil {
		t.Fatal(err)
	}
	if err := f.Fsync(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	stale.release(t)
	if err := <-asked; err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, f, "f", len(want)); !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes after an answer older than the last write; want the %d written", len(got), len(want))
	}
}
