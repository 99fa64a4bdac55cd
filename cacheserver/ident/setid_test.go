package ident

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestKilledByWriteMatchesTheKernel writes to files of group 3000 as
// several identities and compares what the kernel cleared with what
// KilledByWrite predicts.
func TestKilledByWriteMatchesTheKernel(t *testing.T) {
	requireRoot(t)
	dir := openDir(t)
	member := Cred{UID: 1000, GID: 1000, Groups: []uint32{3000}}
	other := Cred{UID: 1000, GID: 1000}
	tests := map[string]struct {
		cred Cred
		mode uint32
		want uint32
	}{
		"setuid, by anyone":                         {other, 0o4777, syscall.S_ISUID},
		"setgid with group execute, by a member":    {member, 0o2777, syscall.S_ISGID},
		"setgid without group execute, by a member": {member, 0o2767, 0},
		"setgid without group execute, by another":  {other, 0o2767, syscall.S_ISGID},
		"primary group counts as membership":        {Cred{UID: 1000, GID: 3000}, 0o2767, 0},
		"both, by another":                          {other, 0o6767, syscall.S_ISUID | syscall.S_ISGID},
		"root keeps both":                           {Cred{UID: 0, GID: 0, Groups: []uint32{1}}, 0o6777, 0},
		"root without CAP_FSETID loses both":        {Cred{UID: 0, GID: 0, HasCaps: true}, 0o6767, syscall.S_ISUID | syscall.S_ISGID},
		"another with CAP_FSETID keeps both":        {Cred{UID: 1000, GID: 1000, HasCaps: true, Caps: 1 << unix.CAP_FSETID}, 0o6767, 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, []byte("data"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(p, 2000, 3000); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Chmod(p, tc.mode); err != nil {
				t.Fatal(err)
			}
			if got := tc.cred.KilledByWrite(syscall.S_IFREG|tc.mode, 3000); got != tc.want {
				t.Errorf("KilledByWrite(%o) = %o, want %o", tc.mode, got, tc.want)
			}
			err := Do(tc.cred, func() error {
				f, err := os.OpenFile(p, os.O_WRONLY, 0)
				if err != nil {
					return err
				}
				_, err = f.WriteAt([]byte("x"), 0)
				return errors.Join(err, f.Close())
			})
			if err != nil {
				t.Fatal(err)
			}
			var st syscall.Stat_t
			if err := syscall.Stat(p, &st); err != nil {
				t.Fatal(err)
			}
			if cleared := tc.mode &^ st.Mode & 0o7777; cleared != tc.want {
				t.Errorf("the kernel cleared %o of %o, want %o", cleared, tc.mode, tc.want)
			}
		})
	}
}
