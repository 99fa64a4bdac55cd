package posix

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// fsxConfig turns on every operation the mount supports: pread, pwrite,
// mapped reads and writes, msync(MS_INVALIDATE), ftruncate, fsync,
// fdatasync, posix_fallocate, sendfile, posix_fadvise, copy_file_range,
// and closing and reopening the file.
const fsxConfig = `
flen = 262144

[opsize]
max = 65536

[weights]
close_open = 2
read = 10
write = 10
mapread = 5
mapwrite = 5
invalidate = 1
truncate = 3
fsync = 1
fdatasync = 1
posix_fallocate = 1
sendfile = 1
posix_fadvise = 1
copy_file_range = 1
`

// fsxOps is the number of operations per seed, fewer in -short mode.
const fsxOps = 20000

// fsxSeeds is how many seeds run with and without the client cache: ten
// seeds of 20,000 operations without it, the mode whose every operation
// reaches the namespace, and a few with the kernel's write-back cache, to
// keep the suite within its CPU budget (about ten CPU seconds a seed).
var fsxSeeds = map[string]int{"no client cache": 10, "client cache": 3}

// fsxSoak, when set, is how many seeds run in each mode instead: a soak.
var fsxSoak = flag.Int("fsx-seeds", 0, "run this many fsx seeds in each mode (a soak) instead of the default")

// TestFsx runs fsx over the mount for several seeds, one file each,
// concurrently on the same mount.
func TestFsx(t *testing.T) {
	bin := cargoTool(t, "fsx")
	for name, opts := range map[string][]mountOption{
		"no client cache": nil,
		"client cache":    {withClientCache()},
	} {
		t.Run(name, func(t *testing.T) {
			dir, _ := mountUnderTest(t, opts...)
			conf := filepath.Join(t.TempDir(), "fsx.toml")
			if err := os.WriteFile(conf, []byte(fsxConfig), 0o644); err != nil {
				t.Fatal(err)
			}
			ops := fsxOps
			if testing.Short() {
				ops = 2000
			}
			seeds := fsxSeeds[name]
			if *fsxSoak > 0 {
				seeds = *fsxSoak
			}
			for seed := 1; seed <= seeds; seed++ {
				t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
					t.Parallel()
					runFsx(t, bin, conf, dir, seed, ops)
				})
			}
		})
	}
}

func runFsx(t *testing.T, bin, conf, dir string, seed, ops int) {
	artifacts := t.TempDir()
	file := filepath.Join(dir, fmt.Sprintf("fsx-%d", seed))
	cmd := exec.Command(bin, "-f", conf, "-S", fmt.Sprint(seed), "-N", fmt.Sprint(ops), "-P", artifacts, file)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("fsx seed %d: %v\n%s", seed, err, ends(out, 3000, 3000))
	}
}

// ends returns the first head and the last tail bytes of b: fsx reports
// what differed first, and the operations that led there last.
func ends(b []byte, head, tail int) []byte {
	if len(b) <= head+tail {
		return b
	}
	return slices.Concat(b[:head], []byte("\n[...]\n"), b[len(b)-tail:])
}
