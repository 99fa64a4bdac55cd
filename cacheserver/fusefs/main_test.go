package fusefs

import (
	"os"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/vfs"
)

// TestMain keeps read-ahead from mapping slabs: these tests map files of
// the mount this process serves (see vfs.DisableMappedReadAhead).
func TestMain(m *testing.M) {
	vfs.DisableMappedReadAhead()
	os.Exit(m.Run())
}
