package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// outOfFiles is a namespace whose every lookup fails as when the process
// has no descriptor left.
type outOfFiles struct{ namespace.FS }

func (outOfFiles) GetAttr(_ context.Context, p string) (namespace.Attr, error) {
	return namespace.Attr{}, fmt.Errorf("opening %q: %w", p, syscall.EMFILE)
}

// TestOutOfFilesIsLoggedOnce checks that requests that fail for want of a
// descriptor give their callers EMFILE, and the server's log one warning,
// not one a request.
func TestOutOfFilesIsLoggedOnce(t *testing.T) {
	var logs lockedBuffer
	s, err := New(Config{NS: outOfFiles{}, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		req := &wire.Request{Op: wire.OpGetAttr, Args: wire.NewDecoder(new(wire.Encoder).String("f").Bytes())}
		var resp wire.Response
		s.ServeWire(context.Background(), req, &resp)
		if !errors.Is(resp.Err, syscall.EMFILE) {
			t.Fatalf("a lookup without descriptors failed with %v, want EMFILE", resp.Err)
		}
	}
	if n := strings.Count(logs.String(), "want of file descriptors"); n != 1 {
		t.Errorf("3 requests without descriptors logged %d warnings, want 1:\n%s", n, logs.String())
	}
}
