package server_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/client"
	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/server/servertest"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// watchReply is an answer to wire.OpWatch.
type watchReply struct {
	epoch, seq uint64
	all        bool
	paths      []string
}

func watchCall(ctx context.Context, cl *wire.Client, epoch, seq uint64) (watchReply, error) {
	args := (&wire.Encoder{}).Uint64(epoch).Uint64(seq)
	rep, err := cl.Do(ctx, &wire.Call{Op: wire.OpWatch, Cred: ident.Process(), Args: args.Bytes()})
	if err != nil {
		return watchReply{}, err
	}
	d := wire.NewDecoder(rep.Meta)
	r := watchReply{epoch: d.Uint64(), seq: d.Uint64(), all: d.Bool()}
	for range d.Uint32() {
		r.paths = append(r.paths, d.String())
	}
	return r, d.Err()
}

// invalidating runs an invalidation of p in the background; its error
// comes on the channel.
func invalidating(ctl *control.Client, p string) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- ctl.InvalidatePath(context.Background(), p) }()
	return errc
}

// returnsWithin reports whether errc delivers nil within d, failing the
// test on an error.
func returnsWithin(t *testing.T, errc <-chan error, d time.Duration) bool {
	t.Helper()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("invalidate: %v", err)
		}
		return true
	case <-time.After(d):
		return false
	}
}

// TestWatchTellsInvalidatedPaths speaks wire.OpWatch to a server: an
// invalidation waits for the client that watches until it asks again, or
// its connection ends; a client from another epoch, or one further behind
// than the server remembers, is told to drop everything.
func TestWatchTellsInvalidatedPaths(t *testing.T) {
	in := servertest.Start(t, t.TempDir(), servertest.Options{Servers: 1, ExtentSize: 4096})
	ctl := control.NewClient(in.Control[0], nil, nil)
	ctx := context.Background()
	cl := wire.NewClient(in.Data[0], wire.ClientOptions{Conns: 1})
	defer cl.Close()

	first, err := watchCall(ctx, cl, 0, 0)
	if err != nil || first.epoch == 0 || first.all || len(first.paths) != 0 {
		t.Fatalf("first watch = %+v, %v; want the epoch and nothing to drop", first, err)
	}
	errc := invalidating(ctl, "d/f")
	if returnsWithin(t, errc, 200*time.Millisecond) {
		t.Fatal("the invalidation returned before the watching client took it")
	}
	got, err := watchCall(ctx, cl, first.epoch, first.seq)
	if err != nil || got.all || !slices.Equal(got.paths, []string{"d/f"}) || got.seq <= first.seq {
		t.Fatalf("watch = %+v, %v; want d/f", got, err)
	}
	if returnsWithin(t, errc, 200*time.Millisecond) {
		t.Fatal("the invalidation returned before the client said it dropped the path")
	}
	next := make(chan error, 1)
	go func() {
		_, err := watchCall(ctx, cl, got.epoch, got.seq)
		next <- err
	}()
	if !returnsWithin(t, errc, 5*time.Second) {
		t.Fatal("the invalidation still waits after the client asked again")
	}

	// The client's connection ends while it holds a notice: the server
	// stops waiting for it.
	errc = invalidating(ctl, "g")
	if err := <-next; err != nil {
		t.Fatalf("watch: %v", err)
	}
	cl.Close()
	if !returnsWithin(t, errc, 5*time.Second) {
		t.Fatal("the invalidation waits for a client whose connection ended")
	}

	other := wire.NewClient(in.Data[0], wire.ClientOptions{Conns: 1})
	if r, err := watchCall(ctx, other, first.epoch+1, 1); err != nil || !r.all {
		t.Fatalf("watch of another epoch = %+v, %v; want everything dropped", r, err)
	}
	other.Close()
	for range 5000 {
		if err := ctl.InvalidatePath(ctx, "many"); err != nil {
			t.Fatal(err)
		}
	}
	behind := wire.NewClient(in.Data[0], wire.ClientOptions{Conns: 1})
	defer behind.Close()
	if r, err := watchCall(ctx, behind, first.epoch, got.seq); err != nil || !r.all {
		t.Fatalf("watch of a client far behind = %+v, %v; want everything dropped", r, err)
	}
}

// TestInvalidateWaitsForClientsOfAnEarlierRun invalidates a path on a
// server that just started, before the clients that watched its previous
// run watch again: they still cache what the path held, and the
// invalidation must wait until one of them, watching again, was told to
// drop everything and said it did.
func TestInvalidateWaitsForClientsOfAnEarlierRun(t *testing.T) {
	in := servertest.Start(t, t.TempDir(), servertest.Options{Servers: 1, ExtentSize: 4096})
	ctl := control.NewClient(in.Control[0], nil, nil)
	ctx := context.Background()
	errc := invalidating(ctl, "f")
	if returnsWithin(t, errc, 500*time.Millisecond) {
		t.Fatal("the invalidation returned before the clients of the previous run could watch again")
	}
	cl := wire.NewClient(in.Data[0], wire.ClientOptions{Conns: 1})
	defer cl.Close()
	again, err := watchCall(ctx, cl, 12345, 7)
	if err != nil || !again.all {
		t.Fatalf("watch of a client of the previous run = %+v, %v; want everything dropped", again, err)
	}
	if returnsWithin(t, errc, 200*time.Millisecond) {
		t.Fatal("the invalidation returned before the client said it dropped everything")
	}
	go func() { _, _ = watchCall(ctx, cl, again.epoch, again.seq) }()
	if !returnsWithin(t, errc, 5*time.Second) {
		t.Fatal("the invalidation still waits after the client asked again")
	}
}

// TestInvalidateWaitsForTheMount has a client watch, as a mount does, and
// checks that an invalidation returns only once the client's drop did.
func TestInvalidateWaitsForTheMount(t *testing.T) {
	in := servertest.Start(t, t.TempDir(), servertest.Options{Servers: 2, ExtentSize: 4096})
	f, err := client.New(client.Options{Servers: in.Data, ExtentSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dropped := make(chan []string, 100)
	release := make(chan struct{})
	f.Watch(func(paths []string) {
		dropped <- paths
		if slices.Contains(paths, "held") {
			<-release
		}
	})
	// The watches begin in the background: invalidate until both servers
	// told the client.
	ctl := []*control.Client{control.NewClient(in.Control[0], nil, nil), control.NewClient(in.Control[1], nil, nil)}
	for i, c := range ctl {
		for told := false; !told; {
			if err := c.InvalidatePath(context.Background(), "warm"); err != nil {
				t.Fatal(err)
			}
			select {
			case p := <-dropped:
				told = slices.Equal(p, []string{"warm"})
			case <-time.After(50 * time.Millisecond):
			}
		}
		t.Logf("server %d tells the client", i)
	}
	errc := invalidating(ctl[1], "held")
	if returnsWithin(t, errc, 300*time.Millisecond) {
		t.Fatal("the invalidation returned before the client dropped the path")
	}
	close(release)
	if !returnsWithin(t, errc, 5*time.Second) {
		t.Fatal("the invalidation still waits after the client dropped the path")
	}
}

// TestWatchOfLongPathsFitsAFrame has a client come back, on the server run
// it watched, after as many invalidations of paths of PATH_MAX as the
// server remembers: the paths alone pass what a frame may carry
// (wire.MaxMeta), and the client must still get an answer it can read,
// rather than one its connection refuses at every try.
func TestWatchOfLongPathsFitsAFrame(t *testing.T) {
	in := servertest.Start(t, t.TempDir(), servertest.Options{Servers: 1, ExtentSize: 4096})
	ctl := control.NewClient(in.Control[0], nil, nil)
	ctx := context.Background()
	cl := wire.NewClient(in.Data[0], wire.ClientOptions{Conns: 1})
	first, err := watchCall(ctx, cl, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	cl.Close()
	long := strings.Repeat(strings.Repeat("x", 254)+"/", 16) + strings.Repeat("y", 4095-16*255)
	for i := range 4096 {
		if err := ctl.InvalidatePath(ctx, long[:len(long)-4]+fmt.Sprintf("%04d", i)); err != nil {
			t.Fatal(err)
		}
	}
	back := wire.NewClient(in.Data[0], wire.ClientOptions{Conns: 1})
	defer back.Close()
	r, err := watchCall(ctx, back, first.epoch, first.seq)
	if err != nil {
		t.Fatalf("watch after 4096 invalidations of long paths: %v", err)
	}
	if !r.all && len(r.paths) != 4096 {
		t.Errorf("watch told %d paths and all=%v; want all 4096 or everything dropped", len(r.paths), r.all)
	}
}
