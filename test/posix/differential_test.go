package posix

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// diffNames are the paths the random operations use: few enough that
// operations collide on them and reach the error cases.
var diffNames = []string{"a", "b", "d", "d/a", "d/b", "d/d", "d/d/a"}

// diffOp is one random file operation, applied to a root directory; it
// returns its outcome as text, errors as their errno.
type diffOp struct {
	name string // the operation and its arguments, for failure messages
	op   string // the operation alone
	path string // the name it works on
	// apply applies the operation under root and returns its outcome.
	apply func(root string) string
}

// outcome formats a result and an error.
func outcome(result string, err error) string {
	if err != nil {
		var e syscall.Errno
		if errors.As(err, &e) {
			return "errno " + e.Error()
		}
		return "error " + err.Error()
	}
	return "ok " + result
}

func drawOp(t *rapid.T) diffOp {
	p := rapid.SampledFrom(diffNames).Draw(t, "path")
	q := rapid.SampledFrom(diffNames).Draw(t, "other")
	data := rapid.StringMatching(`[a-z]{0,40}`).Draw(t, "data")
	// Offsets are mostly small, within a file's first extent; the others
	// reach the next extents (64 KiB in the local set-up), across their
	// boundaries.
	off := rapid.OneOf(
		rapid.Int64Range(0, 64),
		rapid.Int64Range(64<<10-48, 64<<10+8),
		rapid.Int64Range(0, 200<<10),
	).Draw(t, "off")
	mode := rapid.SampledFrom([]uint32{0o644, 0o600, 0o755, 0o700, 0o444}).Draw(t, "mode")
	j := func(root, name string) string { return filepath.Join(root, name) }
	ops := map[string]func(root string) string{
		"create": func(r string) string { return outcome("", os.WriteFile(j(r, p), []byte(data), 0o644)) },
		"write at": func(r string) string {
			f, err := os.OpenFile(j(r, p), os.O_WRONLY, 0)
			if err != nil {
				return outcome("", err)
			}
			defer f.Close()
			_, err = f.WriteAt([]byte(data), off)
			return outcome("", err)
		},
		"append": func(r string) string {
			f, err := os.OpenFile(j(r, p), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
			if err != nil {
				return outcome("", err)
			}
			defer f.Close()
			_, err = f.WriteString(data)
			return outcome("", err)
		},
		"read":     func(r string) string { b, err := os.ReadFile(j(r, p)); return outcome(string(b), err) },
		"truncate": func(r string) string { return outcome("", os.Truncate(j(r, p), off)) },
		"mkdir":    func(r string) string { return outcome("", syscall.Mkdir(j(r, p), mode)) },
		"rmdir":    func(r string) string { return outcome("", syscall.Rmdir(j(r, p))) },
		"unlink":   func(r string) string { return outcome("", syscall.Unlink(j(r, p))) },
		"rename":   func(r string) string { return outcome("", syscall.Rename(j(r, p), j(r, q))) },
		"link":     func(r string) string { return outcome("", syscall.Link(j(r, p), j(r, q))) },
		"symlink":  func(r string) string { return outcome("", syscall.Symlink(q, j(r, p))) },
		"readlink": func(r string) string { s, err := os.Readlink(j(r, p)); return outcome(s, err) },
		"chmod":    func(r string) string { return outcome("", syscall.Chmod(j(r, p), mode)) },
		"stat":     func(r string) string { return statOutcome(j(r, p)) },
		"readdir":  func(r string) string { return readdirOutcome(j(r, p)) },
	}
	// Cache hints must not change what the mount shows: a flush writes
	// back, an evict writes back and drops, an invalidate drops clean
	// extents. They go to a name that exists, or to the whole tree.
	for _, h := range []string{"flush", "evict", "invalidate"} {
		ops[h] = func(r string) string {
			if err := syscall.Lstat(j(r, p), new(syscall.Stat_t)); err != nil {
				return outcome("", err)
			}
			return outcome("", hint(h, j(r, p)))
		}
		ops[h+" tree"] = func(r string) string { return outcome("", hint(h, r)) }
	}
	names := make([]string, 0, len(ops))
	for name := range ops {
		names = append(names, name)
	}
	slices.Sort(names)
	name := rapid.SampledFrom(names).Draw(t, "op")
	return diffOp{name: fmt.Sprintf("%s %s %s %q %d %o", name, p, q, data, off, mode), op: name, path: p, apply: ops[name]}
}

func statOutcome(name string) string {
	var st syscall.Stat_t
	if err := syscall.Lstat(name, &st); err != nil {
		return outcome("", err)
	}
	size := st.Size
	if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		size = 0 // directory sizes are the file system's business
	}
	return outcome(fmt.Sprintf("mode %o nlink %d size %d", st.Mode, st.Nlink, size), nil)
}

func readdirOutcome(name string) string {
	entries, err := os.ReadDir(name)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name()+":"+e.Type().String())
	}
	return outcome(strings.Join(out, ","), err)
}

// snapshot describes every file under root: type, permissions, size,
// contents and link targets.
func snapshot(t *rapid.T, root string) map[string]string {
	out := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		out[rel] = statOutcome(path)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(path)
			out[rel] += " -> " + target
		case d.Type().IsRegular():
			b, err := os.ReadFile(path)
			out[rel] += " " + outcome(string(b), err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	return out
}

// seedDirs are the directories seedTree makes, parents first.
var seedDirs = []string{"d", "d/d"}

// seedTree starts root with a few of the names, so that the operations
// find something to work on.
func seedTree(t *rapid.T, root string) {
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range seedDirs {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"a", "d/a"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte("seed "+f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDifferential applies the same random operations, cache hints among
// them, to the mount and to a plain directory of the backing file system's
// kind and compares every outcome and, at the end, the whole tree: through
// the mount, and in the backing directory once it is written back.
func TestDifferential(t *testing.T) {
	dir, backing := mountUnderTest(t)
	checkDifferential(t, []string{dir}, backing, rapid.Custom(drawOp))
}

// TestDifferentialClientCache does the same through a mount with the
// client cache, where the kernel keeps pages, attributes and names, and
// gathers writes in its page cache, across opens.
func TestDifferentialClientCache(t *testing.T) {
	dir, backing := mountUnderTest(t, withClientCache())
	checkDifferential(t, []string{dir}, backing, rapid.Custom(drawOp))
}

// TestDifferentialTwoMounts does the same through two mounts of the same
// files, each operation through either: without the client cache, a mount
// must see what the other wrote and closed (close-to-open), whatever it
// keeps of a file (leases on cached extents, read-ahead, attributes).
// Directories are neither made, removed, renamed nor given a new mode,
// since a mount trusts the names and attributes of directories for a
// second: a chmod that a symbolic link leads to a directory changes
// nothing.
func TestDifferentialTwoMounts(t *testing.T) {
	a, backing := mountUnderTest(t)
	b, _ := mountUnderTest(t, sharing(backing))
	fileOps := rapid.Map(rapid.Custom(drawOp).Filter(func(op diffOp) bool {
		switch op.op {
		case "mkdir", "rmdir":
			return false
		case "rename", "chmod":
			return !slices.Contains(seedDirs, op.path)
		}
		return true
	}), func(op diffOp) diffOp {
		if op.op == "chmod" {
			chmod := op.apply
			op.apply = func(r string) string {
				if st, err := os.Stat(filepath.Join(r, op.path)); err == nil && st.IsDir() {
					return "directory left alone"
				}
				return chmod(r)
			}
		}
		return op
	})
	checkDifferential(t, []string{a, b}, backing, fileOps)
}

// checkDifferential applies random operations from ops through the mounts
// of the same files, each through one drawn at random, and to a plain
// directory, and compares every outcome; at the end the tree through every
// mount, and the backing directory once written back, must equal the plain
// one.
func checkDifferential(t *testing.T, mounts []string, backing string, ops *rapid.Generator[diffOp]) {
	plain := publicTempDir(t)
	run, succeeded, total := 0, 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		sub := fmt.Sprint(run)
		b := filepath.Join(plain, sub)
		for _, root := range []string{filepath.Join(mounts[0], sub), b} {
			seedTree(rt, root)
		}
		for i, op := range rapid.SliceOfN(ops, 10, 60).Draw(rt, "ops") {
			m := rapid.IntRange(0, len(mounts)-1).Draw(rt, "mount")
			got, want := op.apply(filepath.Join(mounts[m], sub)), op.apply(b)
			if got != want {
				rt.Fatalf("operation %d (%s) through mount %d: mount gives %q, plain directory %q", i, op.name, m, got, want)
			}
			total++
			if strings.HasPrefix(got, "ok") {
				succeeded++
			}
		}
		want := snapshot(rt, b)
		for m, dir := range mounts {
			if d := cmp.Diff(want, snapshot(rt, filepath.Join(dir, sub))); d != "" {
				rt.Fatalf("trees differ (-plain +mount %d):\n%s", m, d)
			}
		}
		// Once written back, the backing directory holds the same tree.
		// A file closed just now may still be open at the mount, under a
		// hidden name, until the kernel's release reaches it.
		settleBacking(t, mounts[0])
		back := filepath.Join(backing, sub)
		var d string
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if d = cmp.Diff(want, snapshot(rt, back)); d == "" || time.Now().After(deadline) {
				break
			}
		}
		if d != "" {
			rt.Fatalf("backing tree differs after a flush (-plain +backing):\n%s", d)
		}
	})
	// A run whose operations mostly fail compares little: make sure the
	// generator reaches the successful paths too.
	t.Logf("%d of %d operations succeeded", succeeded, total)
	if succeeded < total/4 {
		t.Fatalf("only %d of %d operations succeeded", succeeded, total)
	}
}
