package repo

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRootAbove(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module example.com/m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, dir := range map[string]string{"at the root": root, "two levels below": deep} {
		if got, err := rootAbove(dir); err != nil || got != root {
			t.Errorf("%s: rootAbove(%s) = %q, %v; want %q", name, dir, got, err, root)
		}
	}
}

func TestRootIsThisCheckout(t *testing.T) {
	got, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Dir(filepath.Dir(wd)); got != want {
		t.Fatalf("Root() = %q; want %q, two levels above test/repo", got, want)
	}
}
