package posixns

import (
	"context"
	"os"
	"testing"
)

// BenchmarkGetAttr measures a metadata call as the process itself and as
// another identity, which adds the identity switch of ident.Do.
func BenchmarkGetAttr(b *testing.B) {
	for name, ctx := range map[string]context.Context{"as process": context.Background(), "as caller": asNobody()} {
		b.Run(name, func(b *testing.B) {
			if ctx != context.Background() && os.Geteuid() != 0 {
				b.Skip("switching identities needs root")
			}
			fsys, dir := newFSB(b)
			if err := os.MkdirAll(dir+"/a/b", 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(dir+"/a/b/f", []byte("x"), 0o644); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := fsys.GetAttr(ctx, "a/b/f"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadAt measures a 4 KiB read, which opens the file per call.
func BenchmarkReadAt(b *testing.B) {
	fsys, dir := newFSB(b)
	if err := os.WriteFile(dir+"/f", make([]byte, 1<<20), 0o644); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 4096)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if _, err := fsys.ReadAt(context.Background(), "f", buf, 8192); err != nil {
			b.Fatal(err)
		}
	}
}

func newFSB(b *testing.B) (*FS, string) {
	dir, err := os.MkdirTemp("", "posixns-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	fsys, err := New(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fsys.Close() })
	return fsys, dir
}
