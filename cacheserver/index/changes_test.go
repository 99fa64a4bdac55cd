package index

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/vfs"
)

// TestChangesRoundTrip commits change records, of both kinds, with an
// identity and without, and deletes one: an index opened again loads
// exactly the others.
func TestChangesRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "index.db")
	db, err := Open(path, vfs.OS{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[Change]ChangeRecord{
		{NamesChanged, "a/b"}: {Cred: &ident.Cred{UID: 1, GID: 2, Groups: []uint32{3}}},
		{AttrsChanged, "a/b"}: {},
		{NamesChanged, "."}:   {Cred: &ident.Cred{UID: 4}},
	}
	b := Batch{Changes: map[Change]*ChangeRecord{}}
	for c, r := range want {
		b.Changes[c] = &r
	}
	b.Changes[Change{AttrsChanged, "gone"}] = &ChangeRecord{}
	if err := db.Commit(b); err != nil {
		t.Fatal(err)
	}
	if err := db.Commit(Batch{Changes: map[Change]*ChangeRecord{{AttrsChanged, "gone"}: nil}}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = Open(path, vfs.OS{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got := map[Change]ChangeRecord{}
	if err := db.LoadChanges(func(c Change, r ChangeRecord) error { got[c] = r; return nil }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
}
