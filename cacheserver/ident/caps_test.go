package ident

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

func capsOf(ns ...int) Caps {
	var c Caps
	for _, n := range ns {
		c |= 1 << uint(n)
	}
	return c
}

// TestDoGivesTheThreadTheCallersCapabilities runs file-system calls as
// identities whose capabilities differ from what their uid gives: root
// without capabilities (a container that dropped them all) must be refused
// what the kernel refuses such a process, and a user holding
// CAP_DAC_OVERRIDE or CAP_CHOWN granted what the kernel grants it.
func TestDoGivesTheThreadTheCallersCapabilities(t *testing.T) {
	requireRoot(t)
	dir := privateTree(t)
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(secret, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	read := func(p string) func() error {
		return func() error { _, err := os.ReadFile(filepath.Join(dir, p)); return err }
	}
	chown := func() error { return os.Chown(secret, 1000, 0) }
	rootNoCaps := Cred{UID: 0, GID: 0, HasCaps: true}
	tests := map[string]struct {
		cred    Cred
		fn      func() error
		wantErr error
	}{
		"root without caps reads a 0600 file of another user": {rootNoCaps, read("secret"), fs.ErrPermission},
		"root without caps searches a 0700 directory":         {rootNoCaps, read("private/file"), fs.ErrPermission},
		"root without caps chowns":                            {rootNoCaps, chown, fs.ErrPermission},
		"root with CAP_DAC_READ_SEARCH reads":                 {Cred{HasCaps: true, Caps: capsOf(unix.CAP_DAC_READ_SEARCH)}, read("private/file"), nil},
		"root with all caps reads":                            {Cred{HasCaps: true, Caps: FSCaps}, read("secret"), nil},
		"root whose caps are unknown reads":                   {Cred{Groups: []uint32{1}}, read("secret"), nil},
		"user without caps reads":                             {Cred{UID: 2000, GID: 2000, HasCaps: true}, read("secret"), fs.ErrPermission},
		"user with CAP_DAC_OVERRIDE reads":                    {Cred{UID: 2000, GID: 2000, HasCaps: true, Caps: capsOf(unix.CAP_DAC_OVERRIDE)}, read("secret"), nil},
		"user with CAP_CHOWN chowns":                          {Cred{UID: 2000, GID: 2000, HasCaps: true, Caps: capsOf(unix.CAP_CHOWN)}, chown, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := Do(tc.cred, tc.fn)
			if !errors.Is(err, tc.wantErr) && (tc.wantErr != nil || err != nil) {
				t.Fatalf("as %s: err = %v, want %v", tc.cred, err, tc.wantErr)
			}
		})
	}
}

// TestDoRestoresTheThreadsCapabilities checks that a thread handed back to
// the runtime after Do holds the capabilities it held before.
func TestDoRestoresTheThreadsCapabilities(t *testing.T) {
	requireRoot(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := threadCaps()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []Cred{{HasCaps: true}, {UID: 1000, GID: 1000, HasCaps: true, Caps: FSCaps}} {
		prev, err := switchTo(c)
		if err != nil {
			t.Fatal(err)
		}
		during, _ := threadCaps()
		if want := effective(before)&^FSCaps | effective(before)&c.EffectiveCaps(); effective(during) != want {
			t.Errorf("as %s: effective caps %#x, want %#x", c, effective(during), want)
		}
		if err := restore(prev); err != nil {
			t.Fatal(err)
		}
		after, _ := threadCaps()
		if after != before {
			t.Errorf("after acting as %s: caps %+v, want %+v", c, after, before)
		}
	}
}

// TestProcessCarriesNoCapabilities checks that a Cred made from the
// process's identity for another uid, as a server's configured identity
// is made, has none of the capabilities of a server running as root.
func TestProcessCarriesNoCapabilities(t *testing.T) {
	c := Process()
	c.UID, c.GID, c.Groups = 1000, 1000, nil
	if caps := c.EffectiveCaps(); caps != 0 {
		t.Errorf("the process's identity made over for uid 1000 holds capabilities %#x", caps)
	}
}
