package wire

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/burstcache/burstcache/cacheserver/namespace"
)

func TestMessagesRoundTrip(t *testing.T) {
	now := time.Unix(1700000000, 123456789)
	mode, uid, size := uint32(0o4755), uint32(1000), int64(1<<40)
	tests := map[string]struct {
		encode func(*Encoder)
		decode func(*Decoder) any
		want   any
	}{
		"attr": {
			encode: func(e *Encoder) {
				e.Attr(namespace.Attr{Ino: 7, Mode: 0o100644, Nlink: 2, UID: 1, GID: 2, Size: 3, Blocks: 8, Rdev: 9, Atime: now, Mtime: now, Ctime: now})
			},
			decode: func(d *Decoder) any { return d.Attr() },
			want:   namespace.Attr{Ino: 7, Mode: 0o100644, Nlink: 2, UID: 1, GID: 2, Size: 3, Blocks: 8, Rdev: 9, Atime: now, Mtime: now, Ctime: now},
		},
		"attr with times past what nanoseconds hold": {
			encode: func(e *Encoder) {
				e.Attr(namespace.Attr{Atime: time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC), Mtime: time.Date(2500, 1, 1, 0, 0, 0, 0, time.UTC), Ctime: now})
			},
			decode: func(d *Decoder) any { return d.Attr() },
			want:   namespace.Attr{Atime: time.Unix(0, math.MinInt64), Mtime: time.Unix(0, math.MaxInt64), Ctime: now},
		},
		"setattr with some fields": {
			encode: func(e *Encoder) {
				e.SetAttr(namespace.SetAttr{Mode: &mode, UID: &uid, Size: &size, Mtime: &now, AtimeNow: true, KillSetid: true})
			},
			decode: func(d *Decoder) any { return d.SetAttr() },
			want:   namespace.SetAttr{Mode: &mode, UID: &uid, Size: &size, Mtime: &now, AtimeNow: true, KillSetid: true},
		},
		"empty setattr": {
			encode: func(e *Encoder) { e.SetAttr(namespace.SetAttr{}) },
			decode: func(d *Decoder) any { return d.SetAttr() },
			want:   namespace.SetAttr{},
		},
		"dir entries": {
			encode: func(e *Encoder) {
				e.DirEntries([]namespace.DirEntry{{Name: "a", Mode: 0o40000, Ino: 1}, {Name: "b", Mode: 0o100000, Ino: 2}})
			},
			decode: func(d *Decoder) any { return d.DirEntries() },
			want:   []namespace.DirEntry{{Name: "a", Mode: 0o40000, Ino: 1}, {Name: "b", Mode: 0o100000, Ino: 2}},
		},
		"statfs": {
			encode: func(e *Encoder) {
				e.StatFS(namespace.StatFS{Bsize: 4096, Blocks: 10, Bfree: 5, Bavail: 4, Files: 100, Ffree: 50, NameLen: 255})
			},
			decode: func(d *Decoder) any { return d.StatFS() },
			want:   namespace.StatFS{Bsize: 4096, Blocks: 10, Bfree: 5, Bavail: 4, Files: 100, Ffree: 50, NameLen: 255},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var e Encoder
			tc.encode(&e)
			d := NewDecoder(e.Bytes())
			got := tc.decode(d)
			if d.Err() != nil {
				t.Fatal(d.Err())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTruncatedMetadataIsAnError(t *testing.T) {
	var e Encoder
	e.String("abcdef")
	d := NewDecoder(e.Bytes()[:5])
	if s := d.String(); s != "" || d.Err() == nil {
		t.Errorf("String() = %q, err %v; want an error", s, d.Err())
	}
}
