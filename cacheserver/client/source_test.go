package client

import (
	"context"
	"net"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// earlierServer is a server of an earlier release, as far as an open and
// a read go: its open answers the Attr alone, and its read ignores what
// follows the range, which it records.
type earlierServer struct {
	mu    sync.Mutex
	after [][]byte // the arguments of each read past its range
}

func (s *earlierServer) ServeWire(_ context.Context, req *wire.Request, resp *wire.Response) {
	_ = req.Args.String()
	switch req.Op {
	case wire.OpOpen:
		resp.Meta.Attr(namespace.Attr{Ino: 7, Mode: syscall.S_IFREG | 0o644, Nlink: 1, Size: 10})
	case wire.OpRead:
		_, n := req.Args.Int64(), req.Args.Uint32()
		var after []byte
		for req.Args.More() {
			after = append(after, byte(req.Args.Uint32()))
		}
		s.mu.Lock()
		s.after = append(s.after, after)
		s.mu.Unlock()
		resp.Data = make([]byte, min(n, 10))
		resp.Meta.Bool(true)
	default:
		resp.Err = syscall.ENOSYS
	}
}

// TestOpensAndReadsWithAServerOfAnEarlierRelease opens and reads a file
// through a server whose open answers no creation time, generation or
// change time: the open succeeds, and reads name the inode number the
// open found, which such a server ignores.
func TestOpensAndReadsWithAServerOfAnEarlierRelease(t *testing.T) {
	srv := &earlierServer{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ws := &wire.Server{Handler: srv}
	go func() { _ = ws.Serve(ln) }()
	defer ws.Close()
	f, err := New(Options{Servers: []string{ln.Addr().String()}, ExtentSize: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	if _, err := f.Open(ctx, "f", syscall.O_RDONLY); err != nil {
		t.Fatalf("open through a server of an earlier release: %v", err)
	}
	if got := f.sourceOf("f"); got != (backing.FileID{Ino: 7}) {
		t.Fatalf("the open found %+v, want inode 7 and nothing more", got)
	}
	if n, err := f.ReadAt(ctx, "f", make([]byte, 10), 0); n != 10 {
		t.Fatalf("read %d bytes: %v", n, err)
	}
	// Read as u32 words: the inode number (u64) and the creation time
	// (i64) are two each, the generation one, the change time (i64) two.
	want := [][]byte{{7, 0, 0, 0, 0, 0, 0}}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if diff := cmp.Diff(want, srv.after); diff != "" {
		t.Errorf("arguments after the range of the reads (-want +got):\n%s", diff)
	}
}
