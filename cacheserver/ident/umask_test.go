package ident

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
)

// TestDoUmaskMasksOnlyItsOwnCreations proves that DoUmask applies its umask
// to what fn creates, as the identity asked for, while creations by the
// rest of the process, at the same time and afterwards, keep the process's.
func TestDoUmaskMasksOnlyItsOwnCreations(t *testing.T) {
	requireRoot(t)
	dir := openDir(t)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	pu, ok := processUmask()
	if !ok {
		t.Fatal("the process's umask is unknown")
	}
	umask := pu ^ 0o077
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			p := filepath.Join(dir, "masked"+strconv.Itoa(i))
			err := DoUmask(Cred{UID: 1234, GID: 5678}, umask, func() error { return os.WriteFile(p, nil, 0o666) })
			if err != nil {
				t.Error(err)
				return
			}
			wantMode(t, p, 0o666&^umask, 1234)
		})
		wg.Go(func() {
			p := filepath.Join(dir, "plain"+strconv.Itoa(i))
			if err := os.WriteFile(p, nil, 0o666); err != nil {
				t.Error(err)
				return
			}
			wantMode(t, p, 0o666&^pu, 0)
		})
	}
	wg.Wait()
	if got := syscall.Umask(int(pu)); uint32(got) != pu {
		t.Errorf("the process's umask changed to %o, want %o", got, pu)
	}
}

func wantMode(t *testing.T, p string, mode, uid uint32) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Error(err)
		return
	}
	if st.Mode&0o777 != mode || st.Uid != uid {
		t.Errorf("%s: mode %o owner %d, want %o and %d", filepath.Base(p), st.Mode&0o777, st.Uid, mode, uid)
	}
}

func TestParseUmask(t *testing.T) {
	tests := map[string]struct {
		status string
		want   uint32
		wantOK bool
	}{
		"linux 4.7 and later": {"Name:\tx\nUmask:\t0027\nState:\tR\n", 0o027, true},
		"older kernels":       {"Name:\tx\nState:\tR\n", 0, false},
	}
	for name, tc := range tests {
		got, ok := parseUmask([]byte(tc.status))
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("%s: parseUmask = %o, %v; want %o, %v", name, got, ok, tc.want, tc.wantOK)
		}
	}
}
