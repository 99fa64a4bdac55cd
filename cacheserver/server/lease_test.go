package server_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/client"
	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/cacheserver/namespace"
)

// leaseRig is a server on a Unix socket with a client that reads an extent
// from its lease and a second client that changes the file.
type leaseRig struct {
	t              *testing.T
	ctx            context.Context
	backing, ctl   string
	reader, writer *client.FS
}

const leaseES = 1 << 16

func newLeaseRig(t *testing.T, writerOpts client.Options) *leaseRig {
	backingDir := t.TempDir()
	data, ctl, engines := startOn(t, "unix", backingDir, 1, same)
	r := &leaseRig{t: t, ctx: context.Background(), backing: backingDir, ctl: ctl[0]}
	var err error
	if r.reader, err = client.New(client.Options{Servers: data, ExtentSize: leaseES}); err != nil {
		t.Fatal(err)
	}
	writerOpts.Servers, writerOpts.ExtentSize = data, leaseES
	if r.writer, err = client.New(writerOpts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = r.reader.Close()
		_ = r.writer.Close()
		waitUnpinned(t, engines)
	})
	r.write(r.writer, "f", fill('a', 2*leaseES), 0)
	if err := r.writer.Flush(r.ctx, "f"); err != nil {
		t.Fatal(err)
	}
	// Twice: the first read takes the lease, the second is served by it.
	for range 2 {
		r.expect("f", fill('a', leaseES))
	}
	if got := pinned(engines); got != 1 {
		t.Fatalf("%d slots pinned after reading one extent twice, want the lease's 1", got)
	}
	return r
}

func fill(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }

func (r *leaseRig) write(c *client.FS, p string, data []byte, off int64) {
	r.t.Helper()
	if _, err := c.Create(r.ctx, p, syscall.O_RDWR, 0o644); err != nil && !os.IsExist(err) {
		r.t.Fatal(err)
	}
	if _, err := c.WriteAt(r.ctx, p, data, off); err != nil {
		r.t.Fatal(err)
	}
	if err := c.Flush(r.ctx, p); err != nil {
		r.t.Fatal(err)
	}
}

// expect opens p on the reader, as a process opening the file through a
// mount does, and checks the first extent against want.
func (r *leaseRig) expect(p string, want []byte) {
	r.t.Helper()
	if _, err := r.reader.Open(r.ctx, p, syscall.O_RDONLY); err != nil {
		r.t.Fatal(err)
	}
	got := make([]byte, leaseES)
	n, err := r.reader.ReadAt(r.ctx, p, got, 0)
	if n != len(want) || !bytes.Equal(got[:n], want) {
		r.t.Fatalf("read %d bytes (%v), first %q; want %d bytes of %q", n, err, got[:min(n, 1)], len(want), want[:min(len(want), 1)])
	}
}

// TestLeasesSeeEveryChange reads an extent from a lease, changes it in
// every way the cache knows from another client, and checks that the next
// read sees the change: each change must void the lease.
func TestLeasesSeeEveryChange(t *testing.T) {
	tests := map[string]struct {
		writer client.Options
		change func(r *leaseRig) (want []byte)
	}{
		"overwrite of a clean extent, through the slab": {
			change: func(r *leaseRig) []byte {
				r.writeBack()
				r.write(r.writer, "f", fill('b', leaseES), 0)
				return fill('b', leaseES)
			},
		},
		"partial overwrite of a clean extent, through the socket": {
			writer: client.Options{RemoteReads: true},
			change: func(r *leaseRig) []byte {
				r.writeBack()
				r.write(r.writer, "f", fill('b', 10), 100)
				return append(append(fill('a', 100), fill('b', 10)...), fill('a', leaseES-110)...)
			},
		},
		"overwrite in place of a dirty extent": {
			change: func(r *leaseRig) []byte {
				r.write(r.writer, "f", fill('b', 10), 100)
				r.expect("f", append(append(fill('a', 100), fill('b', 10)...), fill('a', leaseES-110)...))
				r.write(r.writer, "f", fill('c', 10), 200)
				return append(append(append(append(fill('a', 100), fill('b', 10)...), fill('a', 90)...), fill('c', 10)...), fill('a', leaseES-210)...)
			},
		},
		"truncate inside the extent": {
			change: func(r *leaseRig) []byte {
				size := int64(100)
				if _, err := r.writer.SetAttr(r.ctx, "f", namespace.SetAttr{Size: &size}); err != nil {
					r.t.Fatal(err)
				}
				r.write(r.writer, "f", fill('b', 10), 300)
				return append(append(fill('a', 100), fill(0, 200)...), fill('b', 10)...)
			},
		},
		"unlink and create again": {
			change: func(r *leaseRig) []byte {
				if err := r.writer.Unlink(r.ctx, "f"); err != nil {
					r.t.Fatal(err)
				}
				r.write(r.writer, "f", fill('b', 300), 0)
				return fill('b', 300)
			},
		},
		"rename over": {
			change: func(r *leaseRig) []byte {
				r.write(r.writer, "g", fill('b', leaseES), 0)
				if err := r.writer.Rename(r.ctx, "g", "f", 0); err != nil {
					r.t.Fatal(err)
				}
				return fill('b', leaseES)
			},
		},
		"invalidate after a change behind the cache": {
			change: func(r *leaseRig) []byte {
				r.changeBacking()
				if err := control.NewClient(r.ctl, nil, nil).InvalidatePath(r.ctx, "f"); err != nil {
					r.t.Fatal(err)
				}
				return fill('z', leaseES)
			},
		},
		"replacement behind the cache, without invalidate": {
			change: func(r *leaseRig) []byte {
				r.writeBack()
				replaceBackingFile(r.t, r.backing, "f", fill('r', leaseES+7))
				return fill('r', leaseES)
			},
		},
		"evict after a change behind the cache": {
			change: func(r *leaseRig) []byte {
				r.changeBacking()
				if err := control.NewClient(r.ctl, nil, nil).EvictPath(r.ctx, "f"); err != nil {
					r.t.Fatal(err)
				}
				return fill('z', leaseES)
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newLeaseRig(t, tc.writer)
			r.expect("f", tc.change(r))
		})
	}
}

// writeBack writes back every dirty extent, which leaves them cached and
// clean.
func (r *leaseRig) writeBack() {
	r.t.Helper()
	if _, err := control.NewClient(r.ctl, nil, nil).Flush(r.ctx); err != nil {
		r.t.Fatal(err)
	}
}

// changeBacking writes back what the cache holds of f, then rewrites the
// first extent of f on the backing store, behind the cache's back.
func (r *leaseRig) changeBacking() {
	r.t.Helper()
	r.writeBack()
	f, err := os.OpenFile(filepath.Join(r.backing, "f"), os.O_WRONLY, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(fill('z', leaseES), 0); err != nil {
		r.t.Fatal(err)
	}
}
