package fusefs

import (
	"os"
	"testing"
)

// TestMain runs the tests, or, in a child started by mapShared, holds a
// mapping of a file of the mount its parent serves (see mapperMain).
func TestMain(m *testing.M) {
	if os.Getenv(mapperEnv) != "" {
		os.Exit(mapperMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}
