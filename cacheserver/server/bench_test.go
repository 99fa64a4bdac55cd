package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/client"
	"github.com/burstcache/burstcache/cacheserver/engine"
	"github.com/burstcache/burstcache/cacheserver/namespace"
)

// BenchmarkClientOps measures the latency of single operations through a
// striped client over real engine servers on loopback.
func BenchmarkClientOps(b *testing.B) {
	backingDir := b.TempDir()
	os.WriteFile(filepath.Join(backingDir, "f"), make([]byte, 4<<20), 0o644)
	data, _ := startEngineServers(b, backingDir, 2)
	f, _ := client.New(client.Options{Servers: data, ExtentSize: 1 << 16})
	defer f.Close()
	ctx := context.Background()
	buf := make([]byte, 4096)
	f.ReadAt(ctx, "f", make([]byte, 4<<20), 0)
	b.Run("getattr", func(b *testing.B) {
		for range b.N {
			if _, err := f.GetAttr(ctx, "f"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read4k", func(b *testing.B) {
		for i := range b.N {
			if _, err := f.ReadAt(ctx, "f", buf, int64(i%1000)*4096); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("write4k", func(b *testing.B) {
		for i := range b.N {
			if _, err := f.WriteAt(ctx, "f", buf, int64(i%1000)*4096); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkClientRead1MiB measures 1 MiB reads of cached data through a
// striped client (64 KiB extents: 16 pieces over 2 servers per read).
func BenchmarkClientRead1MiB(b *testing.B) {
	backingDir := b.TempDir()
	os.WriteFile(filepath.Join(backingDir, "f"), make([]byte, 4<<20), 0o644)
	data, _ := startEngineServers(b, backingDir, 2)
	f, _ := client.New(client.Options{Servers: data, ExtentSize: 1 << 16})
	defer f.Close()
	ctx := context.Background()
	if err := f.Connect(ctx); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for i := range 4 {
		f.ReadAt(ctx, "f", buf, int64(i)<<20)
	}
	b.SetBytes(1 << 20)
	b.ResetTimer()
	for i := range b.N {
		if _, err := f.ReadAt(ctx, "f", buf, int64(i%4)<<20); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClientNameOps measures creates of empty files (a create and a
// close), of files of 4 KiB (a create, a write and a close), renames
// within a directory, and chmods and truncates, through a striped client
// over
// two engine servers, with each durability in the same run: with Backing
// each call returns once its names are durable on the backing store,
// with Cache a flush makes them so later.
func BenchmarkClientNameOps(b *testing.B) {
	for _, d := range []engine.Durability{engine.Cache, engine.Backing} {
		b.Run(string(d), func(b *testing.B) {
			data, _, _ := startServers(b, "tcp", b.TempDir(), 2, same, sameStore, func(c *engine.Config) { c.Durability = d })
			f, err := client.New(client.Options{Servers: data, ExtentSize: 1 << 16})
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			ctx := context.Background()
			if _, err := f.Mkdir(ctx, "d", 0o755); err != nil {
				b.Fatal(err)
			}
			create := func(p string) {
				if _, err := f.Create(ctx, p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); err != nil {
					b.Fatal(err)
				}
				if err := f.Flush(ctx, p); err != nil {
					b.Fatal(err)
				}
			}
			b.Run("create", func(b *testing.B) {
				for i := range b.N {
					create(fmt.Sprintf("d/c%d-%d", b.N, i))
				}
			})
			b.Run("create-write", func(b *testing.B) {
				buf := make([]byte, 4096)
				for i := range b.N {
					p := fmt.Sprintf("d/w%d-%d", b.N, i)
					if _, err := f.Create(ctx, p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); err != nil {
						b.Fatal(err)
					}
					if _, err := f.WriteAt(ctx, p, buf, 0); err != nil {
						b.Fatal(err)
					}
					if err := f.Flush(ctx, p); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("rename", func(b *testing.B) {
				b.StopTimer()
				for i := range b.N {
					create(fmt.Sprintf("d/r%d-%d", b.N, i))
				}
				b.StartTimer()
				for i := range b.N {
					if err := f.Rename(ctx, fmt.Sprintf("d/r%d-%d", b.N, i), fmt.Sprintf("d/s%d-%d", b.N, i), 0); err != nil {
						b.Fatal(err)
					}
				}
			})
			// A chmod and a truncate to zero of files whose data is on
			// the backing store: with Backing each returns once the file
			// is fsynced there, with Cache a flush fsyncs it later.
			mode, size := uint32(0o600), int64(0)
			for name, in := range map[string]namespace.SetAttr{
				"chmod":    {Mode: &mode},
				"truncate": {Size: &size},
			} {
				b.Run(name, func(b *testing.B) {
					b.StopTimer()
					for i := range b.N {
						p := fmt.Sprintf("d/%s%d-%d", name, b.N, i)
						create(p)
						if _, err := f.WriteAt(ctx, p, []byte("data"), 0); err != nil {
							b.Fatal(err)
						}
						if err := f.Flush(ctx, p); err != nil {
							b.Fatal(err)
						}
					}
					b.StartTimer()
					for i := range b.N {
						if _, err := f.SetAttr(ctx, fmt.Sprintf("d/%s%d-%d", name, b.N, i), in); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
