package client

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestLoadBalancedLocalServerLost: a load-balanced client reads the slab of
// its server on this machine itself; when that server is lost, its reads
// go to another server of the instance instead of failing.
func TestLoadBalancedLocalServerLost(t *testing.T) {
	backingDir := t.TempDir()
	data := randomData(6*localExtent + 5)
	if err := os.WriteFile(filepath.Join(backingDir, "input"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	var addrs []string
	var stops []func()
	for i := range 2 {
		addr, s := startLocalServer(t, backingDir, localServer{index: i, servers: 2, loadBalanced: true})
		addrs = append(addrs, addr)
		stops = append(stops, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = s.Shutdown(ctx)
		})
	}
	f := connectWith(t, Options{Servers: addrs, ExtentSize: localExtent, LoadBalanced: true, Node: "node-a"})
	if got := readAll(t, f, "input", len(data)+1); !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes that differ from the file", len(got))
	}
	if f.local[0] == nil || f.local[0].leases.offered() == false {
		t.Fatal("the client did not read its server's slab itself")
	}
	stops[f.indexes[0]]()
	if got := readAll(t, f, "input", len(data)+1); !bytes.Equal(got, data) {
		t.Fatalf("with its server lost, read %d bytes that differ from the file", len(got))
	}
}
