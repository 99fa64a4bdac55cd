package wire

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// network returns the network of a server address: an absolute path names a
// Unix domain socket, anything else is a TCP address.
func network(addr string) string {
	if filepath.IsAbs(addr) {
		return "unix"
	}
	return "tcp"
}

// Listen listens for clients on addr, a TCP address or the absolute path of
// a Unix domain socket. A socket file left behind by a server that died is
// replaced; one that a server still answers on is an error (EADDRINUSE).
func Listen(addr string) (net.Listener, error) {
	if network(addr) == "tcp" {
		return net.Listen("tcp", addr)
	}
	if c, err := net.DialTimeout("unix", addr, time.Second); err == nil {
		_ = c.Close()
		return nil, fmt.Errorf("listening on %s: a server answers there: %w", addr, syscall.EADDRINUSE)
	}
	if err := os.Remove(addr); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("removing the stale socket %s: %w", addr, err)
	}
	return net.Listen("unix", addr)
}
