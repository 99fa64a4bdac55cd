package server

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/namespace"
)

// TestHiddenNamesLogStaysSmall notes and forgets many names, as a long-lived
// instance whose jobs unlink open files does: the log is rewritten as it
// goes, and keeps what is still recorded.
func TestHiddenNamesLogStaysSmall(t *testing.T) {
	p := filepath.Join(t.TempDir(), HiddenNamesFile)
	h, err := openHiddenNames(p)
	if err != nil {
		t.Fatal(err)
	}
	c := ident.Cred{UID: 7, GID: 8, Groups: []uint32{9}}
	for i := range 5000 {
		name := fmt.Sprintf("dir/.burstcache-open-%d", i)
		if err := h.note(name, hiddenNote{cred: c}); err != nil {
			t.Fatal(err)
		}
		if i%250 != 0 {
			h.forget(name)
		}
	}
	h.close()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 256<<10 {
		t.Errorf("the log of 20 live names after 5,000 notes holds %d bytes", fi.Size())
	}
	h, err = openHiddenNames(p)
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	if n := h.count(); n != 20 {
		t.Fatalf("reopened log records %d names, want 20", n)
	}
	if got, ok := h.records()["dir/.burstcache-open-1000"]; !ok || got.cred.UID != 7 || got.cred.GID != 8 || len(got.cred.Groups) != 1 || got.cred.Groups[0] != 9 {
		t.Fatalf("reopened record: %+v, %v", got, ok)
	}
}

// TestHiddenNamesKeepCapabilities checks that the identity a hidden name is
// removed as keeps its capabilities across a restart: root that dropped
// them must not remove the name later as full root.
func TestHiddenNamesKeepCapabilities(t *testing.T) {
	p := filepath.Join(t.TempDir(), HiddenNamesFile)
	h, err := openHiddenNames(p)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]hiddenNote{
		"a": {cred: ident.Cred{HasCaps: true}},
		"b": {cred: ident.Cred{UID: 7, GID: 8, HasCaps: true, Caps: ident.FSCaps}},
		"c": {cred: ident.Cred{UID: 9, GID: 9}, why: namespace.Hiding{Name: "c-was-here", Source: "d", SourceIno: 1 << 40}},
	}
	for name, c := range want {
		if err := h.note(name, c); err != nil {
			t.Fatal(err)
		}
	}
	h.close()
	expectReopened(t, p, want)
}

// TestHiddenNamesKeepTheirBytes checks that the log gives back every name
// byte for byte, whatever the bytes, as appended and as rewritten, and the
// names of files hidden for a rename likewise.
func TestHiddenNamesKeepTheirBytes(t *testing.T) {
	p := filepath.Join(t.TempDir(), HiddenNamesFile)
	h, err := openHiddenNames(p)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]hiddenNote{}
	for _, dir := range []string{"caf\xe9", "\xff\xfe", "caf\uFFFD", "a\nb", `c\"d`, "-x", "...", " "} {
		name := dir + "/.burstcache-open-1"
		want[name] = hiddenNote{cred: ident.Cred{UID: 7, GID: 7}, why: namespace.Hiding{Name: dir + "/f\xe9", Source: dir + "/\xff", SourceIno: 3}}
		if err := h.note(name, want[name]); err != nil {
			t.Fatal(err)
		}
	}
	h.close()
	expectReopened(t, p, want)
}

// expectReopened checks that the log at p gives back want when opened, and
// again after opening rewrote it.
func expectReopened(t *testing.T, p string, want map[string]hiddenNote) {
	t.Helper()
	for range 2 { // as the log was appended to, then as it was rewritten
		h, err := openHiddenNames(p)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, h.records(), cmp.AllowUnexported(hiddenNote{})); diff != "" {
			t.Errorf("reopened records (-want +got):\n%s", diff)
		}
		h.close()
	}
}
