package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/cacheserver/durable"
	"github.com/burstcache/burstcache/cacheserver/engine"
	"github.com/burstcache/burstcache/cacheserver/placement"
)

// ErrForeignCacheDir is returned for a cache directory that belongs to
// another instance, another server index, or another placement.
var ErrForeignCacheDir = errors.New("cache directory belongs to another cache server")

// Identity is what a cache directory records about the server that owns it.
type Identity struct {
	// Instance names the instance; that of a local one holds the path of
	// its backing directory, byte for byte (see control.Path).
	Instance   control.Path `json:"instance"`
	Index      int          `json:"index"`
	Servers    int          `json:"servers"`
	ExtentSize int64        `json:"extentSize"`
}

const identityFile = "server.json"

// ClaimCacheDir creates dir if needed and records id in it, or checks that
// the record already there is id. It returns the directory the engine should
// use.
func ClaimCacheDir(dir string, id Identity) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating cache directory: %w", err)
	}
	p := filepath.Join(dir, identityFile)
	data, err := os.ReadFile(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := writeIdentity(p, id); err != nil {
			return "", err
		}
	case err != nil:
		return "", fmt.Errorf("reading cache directory identity: %w", err)
	default:
		var have Identity
		if err := json.Unmarshal(data, &have); err != nil {
			return "", fmt.Errorf("%w: %s is not a server identity: %w", ErrForeignCacheDir, p, err)
		}
		if have != id {
			return "", fmt.Errorf("%w: %s records instance %q server %d of %d with %d-byte extents; this server is instance %q server %d of %d with %d-byte extents",
				ErrForeignCacheDir, dir, have.Instance, have.Index, have.Servers, have.ExtentSize,
				id.Instance, id.Index, id.Servers, id.ExtentSize)
		}
	}
	return filepath.Join(dir, "extents"), nil
}

// writeIdentity writes the record durably: a crash leaves either no
// record (the next start writes it) or the whole record, never an empty
// one that would keep the server, and the dirty data it holds, from
// starting.
func writeIdentity(p string, id Identity) error {
	data, err := json.MarshalIndent(id, "", "  ")
	if err != nil {
		return err
	}
	if err := durable.WriteFile(p, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing cache directory identity: %w", err)
	}
	return nil
}

// FileShare is the part of an instance's limit on files that server id
// counts: the files whose metadata server it is, each counted by one
// server only, as creates and opens for writing reach that server. A
// cache directory keeps its identity across restarts, so the files that
// recovery counts again are the ones counted before.
func FileShare(id Identity) engine.Share {
	l := placement.Layout{Servers: id.Servers, ExtentSize: id.ExtentSize}
	return engine.Share{Index: id.Index, Servers: id.Servers, Counts: func(p string) bool {
		return l.MetaServer(p) == id.Index
	}}
}
