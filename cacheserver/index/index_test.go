package index

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/vfs"
)

func TestCommitLoadRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "index.db")
	db, err := Open(path, vfs.OS{})
	if err != nil {
		t.Fatal(err)
	}
	wantExt := map[Key]Extent{
		{"a/b", 0}:       {Slot: 3, Valid: 4096, DirtyLo: 10, DirtyHi: 20, LastWrite: 123},
		{"a/b", 1 << 40}: {Slot: 1, Valid: 7},
		{"a/b/c", 2}:     {Slot: 0, Valid: 1, LastWrite: -5},
	}
	wantFiles := map[string]File{
		"a/b":   {Size: 1<<40 + 7, Cred: &ident.Cred{UID: 1, GID: 2, Groups: []uint32{3, 4}}},
		"a/b/c": {Size: 9},
		"a/d":   {Size: 5, Dooms: 1},
		"a/e":   {Size: 6, Cred: &ident.Cred{UID: 7}, Dooms: 1},
		"a/f":   {Size: 7, Dooms: 3},
		"a/g":   {Size: 8, Cred: &ident.Cred{UID: 9, Groups: []uint32{10}}, Dooms: 1 << 20},
		"a/h":   {Size: 9, Dooms: 1, DoomedIno: 1<<63 + 5},
		"a/i":   {Size: 10, Cred: &ident.Cred{UID: 11}, Dooms: 2, DoomedIno: 12},
		"a/j":   {Size: 11, Dooms: 1, DoomedIno: 13, DoomedBirth: -14, DoomedGen: 1<<31 + 15},
		"a/k":   {Size: 12, Dooms: 1, Unlinks: []uint64{1<<63 + 16}},
		"a/l":   {Size: 13, Cred: &ident.Cred{UID: 17}, Dooms: 3, DoomedIno: 18, Unlinks: []uint64{19, 20}},
		"a/m":   {Size: 14, Cred: &ident.Cred{HasCaps: true}},
		"a/n":   {Size: 15, Cred: &ident.Cred{UID: 21, Groups: []uint32{22}, HasCaps: true, Caps: ident.FSCaps}, Dooms: 1},
	}
	b := Batch{Extents: map[Key]*Extent{{"gone", 1}: nil}, Files: map[string]*File{"gone": nil}}
	for k, v := range wantExt {
		b.Extents[k] = &v
	}
	for k, v := range wantFiles {
		b.Files[k] = &v
	}
	if err := db.Commit(b); err != nil {
		t.Fatal(err)
	}
	if err := db.SetMeta(Meta{ExtentSize: 4096, Slots: 10}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = Open(path, vfs.OS{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	gotExt, gotFiles := map[Key]Extent{}, map[string]File{}
	err = db.Load(
		func(p string, f File) error { gotFiles[p] = f; return nil },
		func(k Key, e Extent) error { gotExt[k] = e; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantExt, gotExt); diff != "" {
		t.Errorf("extents (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantFiles, gotFiles); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	if m, ok, err := db.Meta(); err != nil || !ok || m != (Meta{ExtentSize: 4096, Slots: 10}) {
		t.Errorf("meta = %+v, %v, %v", m, ok, err)
	}
}

func TestCommitIsACrashStep(t *testing.T) {
	c := vfs.NewCrashable(vfs.OS{}, 1)
	db, err := Open(filepath.Join(t.TempDir(), "index.db"), c)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c.Crash()
	if err := db.Commit(Batch{Files: map[string]*File{"x": {Size: 1}}}); err == nil {
		t.Fatal("commit on a crashed file system succeeded")
	}
}

// TestFileRecordsOfOneDoomKeepTheirBytes checks that a file record with one
// unlink under way is written as it was before counts were kept, so that
// an index written by either version reads the same in both.
func TestFileRecordsOfOneDoomKeepTheirBytes(t *testing.T) {
	tests := []struct {
		f    File
		want []byte
	}{
		{File{Size: 5, Dooms: 1}, []byte{0, 0, 0, 0, 0, 0, 0, 5, fileDoomed}},
		{File{Size: 6, Cred: &ident.Cred{UID: 7, GID: 8}, Dooms: 1},
			[]byte{0, 0, 0, 0, 0, 0, 0, 6, fileDoomed | fileCred, 0, 0, 0, 7, 0, 0, 0, 8, 0, 0, 0, 0}},
	}
	// Capabilities that the uid gives anyway are not recorded: the record
	// stays what a release without capabilities wrote.
	for _, c := range []ident.Cred{{UID: 7, GID: 8, HasCaps: true}, {HasCaps: true, Caps: ident.FSCaps}} {
		f := File{Size: 6, Cred: &c}
		if b := encodeFile(&f); b[8]&fileCaps != 0 {
			t.Errorf("encodeFile(%+v) records capabilities that the uid gives", c)
		}
	}
	for _, tt := range tests {
		b := encodeFile(&tt.f)
		if !bytes.Equal(b, tt.want) {
			t.Errorf("encodeFile(%+v) = %v, want %v", tt.f, b, tt.want)
		}
		got, err := decodeFile(tt.want)
		if err != nil || !cmp.Equal(got, tt.f) {
			t.Errorf("decodeFile(%v) = %+v, %v, want %+v", tt.want, got, err, tt.f)
		}
	}
	for _, b := range [][]byte{
		{0, 0, 0, 0, 0, 0, 0, 5, fileDooms, 0, 0, 0, 2},                                                                // a count without the flag it refines
		{0, 0, 0, 0, 0, 0, 0, 5, fileDoomed | fileDooms, 0, 0},                                                         // a cut count
		{0, 0, 0, 0, 0, 0, 0, 5, 0, 1},                                                                                 // bytes after a record without a credential
		{0, 0, 0, 0, 0, 0, 0, 5, fileDoomedAs, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},             // an identity without a doom
		{0, 0, 0, 0, 0, 0, 0, 5, fileDoomed | fileDoomedAs, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0},                        // a cut identity
		{0, 0, 0, 0, 0, 0, 0, 5, fileUnlinks, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1},                                      // unlink ids without a doom
		{0, 0, 0, 0, 0, 0, 0, 5, fileDoomed | fileUnlinks, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2}, // more ids than dooms
		{0, 0, 0, 0, 0, 0, 0, 5, fileDoomed | fileUnlinks, 0, 0, 0, 1, 0, 0, 0, 0},                                     // a cut id
		{0, 0, 0, 0, 0, 0, 0, 5, fileDoomed | fileUnlinks, 0, 0, 0, 0},                                                 // no ids
		{0, 0, 0, 0, 0, 0, 0, 5, fileCaps},                                                                             // capabilities without a credential
		{0, 0, 0, 0, 0, 0, 0, 5, fileCred | fileCaps, 0, 0, 0, 7, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0},                  // cut capabilities
	} {
		if _, err := decodeFile(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decodeFile(%v) = %v, want ErrCorrupt", b, err)
		}
	}
}

// TestOpenRefusesAnIndexInUse: a second process over a cache directory
// (a server started by hand over a running one's, or a restart while the
// old process still finishes its requests) must not open the index: the
// two would hand out the same slots. It waits for the lock, and then fails
// with ErrInUse; once the first lets go, the index opens.
func TestOpenRefusesAnIndexInUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "index.db")
	first, err := Open(path, vfs.OS{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := open(path, vfs.OS{}, 100*time.Millisecond); !errors.Is(err, ErrInUse) {
		t.Fatalf("second open of an index in use: %v, want ErrInUse", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second, err := open(path, vfs.OS{}, 100*time.Millisecond)
	if err != nil {
		t.Fatalf("open after the first closed: %v", err)
	}
	second.Close()
}

// TestSourcesRoundTrip commits source records, deletes one, and loads the
// rest back, all their fields kept.
func TestSourcesRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "index.db")
	db, err := Open(path, vfs.OS{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Source{
		"a":     {Ino: 1<<63 + 1, Birth: -2, Gen: 1<<31 + 3, Change: 1<<62 + 5},
		"a/b":   {Ino: 4},
		"again": {Ino: 6},
	}
	b := Batch{Sources: map[string]*Source{"gone": {Ino: 5, Change: 9}, "again": {Ino: 6, Change: 10}}}
	for p, s := range want {
		if p != "again" {
			b.Sources[p] = &s
		}
	}
	if err := db.Commit(b); err != nil {
		t.Fatal(err)
	}
	// A source deleted takes its version along, and one without a version
	// any version it had.
	if err := db.Commit(Batch{Sources: map[string]*Source{"gone": nil, "again": nil}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Commit(Batch{Sources: map[string]*Source{"again": {Ino: 6}}}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if db, err = Open(path, vfs.OS{}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got := map[string]Source{}
	if err := db.LoadSources(func(p string, s Source) error { got[p] = s; return nil }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sources loaded (-want +got):\n%s", diff)
	}
}
