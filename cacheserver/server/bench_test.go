package server_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/client"
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
