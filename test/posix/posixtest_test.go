package posix

import (
	"testing"

	"github.com/hanwen/go-fuse/v2/posixtest"
)

// notPOSIX lists the posixtest cases that check go-fuse's loopback rather
// than POSIX, with the reason.
var notPOSIX = map[string]string{
	// It takes a write lock through one descriptor and expects a read lock
	// through a second descriptor of the same process to fail. POSIX locks
	// belong to the process, so on a local file system the second lock
	// converts the first and succeeds; go-fuse's loopback passes only
	// because it turns them into per-descriptor OFD locks. The mount leaves
	// locks to the kernel, which keeps the POSIX rule; TestLocks checks
	// locks between processes.
	"FcntlFlockLocksFile": "POSIX locks belong to the process, not the descriptor",
}

// cacheLimits lists, per set-up, the posixtest cases that meet a documented
// limit of the cache rather than a bug, with the reason.
var cacheLimits = map[string]map[string]string{}

// TestGoFusePosix runs the tests of go-fuse's posixtest package, each on a
// fresh mount.
func TestGoFusePosix(t *testing.T) {
	if len(posixtest.All) < 25 {
		t.Fatalf("posixtest.All has only %d tests", len(posixtest.All))
	}
	for name, fn := range posixtest.All {
		if reason, ok := notPOSIX[name]; ok {
			t.Logf("not running %s: %s", name, reason)
			continue
		}
		if reason, ok := cacheLimits[currentName][name]; ok {
			t.Logf("not running %s on %s: %s", name, currentName, reason)
			continue
		}
		t.Run(name, func(t *testing.T) {
			dir, _ := mountUnderTest(t)
			fn(t, dir)
		})
	}
}
