package namespace

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"syscall"
	"testing"
)

func TestCheckPath(t *testing.T) {
	tests := map[string]struct {
		path    string
		wantErr bool
	}{
		"root":               {"", false},
		"file":               {"a", false},
		"nested":             {"a/b/c", false},
		"dots in a name":     {"a/..b/c..", false},
		"absolute":           {"/a", true},
		"dot":                {".", true},
		"dotdot":             {"..", true},
		"escapes the root":   {"../a", true},
		"inner dotdot":       {"a/../b", true},
		"double slash":       {"a//b", true},
		"trailing slash":     {"a/", true},
		"inner dot":          {"a/./b", true},
		"dotdot at the end":  {"a/..", true},
		"climbs after names": {"a/b/../../..", true},
		"bytes not UTF-8":    {"caf\xe9/\xff", false},
		"odd characters":     {"a\nb/ /.../-rf/\"q\"\\", false},
		"a NUL byte":         {"a\x00b", true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := CheckPath(tc.path)
			if (err != nil) != tc.wantErr {
				t.Fatalf("CheckPath(%q) = %v, want error: %v", tc.path, err, tc.wantErr)
			}
			if err != nil && Errno(err) != syscall.EINVAL {
				t.Fatalf("CheckPath(%q) errno = %v, want EINVAL", tc.path, Errno(err))
			}
		})
	}
}

func TestErrno(t *testing.T) {
	tests := map[string]struct {
		err  error
		want syscall.Errno
	}{
		"nil":             {nil, 0},
		"bare errno":      {syscall.ENOENT, syscall.ENOENT},
		"wrapped errno":   {fmt.Errorf("lookup a: %w", syscall.EACCES), syscall.EACCES},
		"path error":      {&fs.PathError{Op: "open", Path: "a", Err: syscall.EROFS}, syscall.EROFS},
		"no errno is EIO": {errors.New("connection reset"), syscall.EIO},
		"joined errors":   {errors.Join(errors.New("x"), syscall.EDQUOT), syscall.EDQUOT},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Errno(tc.err); got != tc.want {
				t.Errorf("Errno(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// TestKeptName checks the name a file takes beside the one another file
// took: in the same directory, recognisable by its infix, and no longer
// than a name may be, however long the file's name.
func TestKeptName(t *testing.T) {
	long := strings.Repeat("x", 255)
	for _, name := range []string{"f", "d/e/f", long, "d/" + long} {
		got := KeptName(name, 1<<63)
		dir, base := path.Split(got)
		if wantDir, _ := path.Split(name); dir != wantDir {
			t.Errorf("KeptName(%q) = %q, in another directory", name, got)
		}
		if len(base) > 255 || !strings.Contains(base, KeptInfix) || !strings.HasPrefix(path.Base(name), strings.Split(base, KeptInfix)[0]) {
			t.Errorf("KeptName(%q) = %q", name, got)
		}
	}
}
