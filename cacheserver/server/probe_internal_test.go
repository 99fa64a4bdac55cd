package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// xattrNS is a namespace of directories that hold the extended attribute
// user.there only.
type xattrNS struct{ namespace.FS }

func (xattrNS) GetAttr(context.Context, string) (namespace.Attr, error) {
	return namespace.Attr{Ino: 7, Mode: syscall.S_IFDIR | 0o755}, nil
}

func (xattrNS) Getxattr(_ context.Context, _, name string, _ []byte) (int, error) {
	if name == "user.there" {
		return 1, nil
	}
	return 0, fmt.Errorf("getxattr %q: %w", name, syscall.ENODATA)
}

// TestGetAttrAnswersProbes sends OpGetAttr with and without names of
// extended attributes: without, the answer is the Attr alone, as clients
// of an earlier release read it; with, an errno for each name follows;
// names cut short fail the request.
func TestGetAttrAnswersProbes(t *testing.T) {
	s, err := New(Config{NS: xattrNS{}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		args    *wire.Encoder
		want    []syscall.Errno
		wantErr error
	}{
		"no names":  {args: new(wire.Encoder).String("d")},
		"names":     {args: new(wire.Encoder).String("d").Uint32(2).String("user.there").String("user.not"), want: []syscall.Errno{0, syscall.ENODATA}},
		"cut short": {args: new(wire.Encoder).String("d").Uint32(2).String("user.there"), wantErr: wire.ErrProtocol},
		"too many":  {args: manyNames(wire.MaxXattrProbes + 1), want: make([]syscall.Errno, wire.MaxXattrProbes)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			req := &wire.Request{Op: wire.OpGetAttr, Args: wire.NewDecoder(tc.args.Bytes())}
			var resp wire.Response
			s.ServeWire(context.Background(), req, &resp)
			if !errors.Is(resp.Err, tc.wantErr) || (tc.wantErr == nil && resp.Err != nil) {
				t.Fatalf("answered %v, want %v", resp.Err, tc.wantErr)
			}
			if tc.wantErr != nil {
				return
			}
			d := wire.NewDecoder(resp.Meta.Bytes())
			if a := d.Attr(); a.Ino != 7 {
				t.Errorf("answered inode %d, want 7", a.Ino)
			}
			var got []syscall.Errno
			if d.More() {
				for range d.Uint32() {
					got = append(got, syscall.Errno(d.Uint32()))
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" || d.More() || d.Err() != nil {
				t.Errorf("probes (-want +got):\n%s (bytes left: %v, %v)", diff, d.More(), d.Err())
			}
		})
	}
}

// manyNames encodes an OpGetAttr of n attributes that exist.
func manyNames(n int) *wire.Encoder {
	e := new(wire.Encoder).String("d").Uint32(uint32(n))
	for range n {
		e.String("user.there")
	}
	return e
}

// linkNS is a namespace of symbolic links to "t", with inode number 9,
// and linkAttrNS one that also reads a link with its attributes.
type linkNS struct{ namespace.FS }

func (linkNS) Readlink(context.Context, string) (string, error) { return "t", nil }

type linkAttrNS struct{ linkNS }

func (linkAttrNS) ReadlinkAttr(context.Context, string) (string, namespace.Attr, error) {
	return "t", namespace.Attr{Ino: 9, Mode: syscall.S_IFLNK | 0o777}, nil
}

// TestReadlinkAnswersAttributesWhenAsked sends OpReadlink with and without
// the flag that asks for the attributes of the link read: without, the
// answer is the target alone, as clients of an earlier release read it;
// with, the Attr follows where the namespace can tell it.
func TestReadlinkAnswersAttributesWhenAsked(t *testing.T) {
	for name, tc := range map[string]struct {
		ns      namespace.FS
		args    *wire.Encoder
		wantIno uint64
	}{
		"not asked":          {ns: linkAttrNS{}, args: new(wire.Encoder).String("l")},
		"asked":              {ns: linkAttrNS{}, args: new(wire.Encoder).String("l").Bool(true), wantIno: 9},
		"asked, cannot tell": {ns: linkNS{}, args: new(wire.Encoder).String("l").Bool(true)},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := New(Config{NS: tc.ns, Log: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			req := &wire.Request{Op: wire.OpReadlink, Args: wire.NewDecoder(tc.args.Bytes())}
			var resp wire.Response
			s.ServeWire(context.Background(), req, &resp)
			if resp.Err != nil {
				t.Fatal(resp.Err)
			}
			d := wire.NewDecoder(resp.Meta.Bytes())
			if target := d.String(); target != "t" {
				t.Errorf("answered the target %q, want t", target)
			}
			var ino uint64
			if d.More() {
				ino = d.Attr().Ino
			}
			if ino != tc.wantIno || d.More() || d.Err() != nil {
				t.Errorf("answered inode %d, want %d (bytes left: %v, %v)", ino, tc.wantIno, d.More(), d.Err())
			}
		})
	}
}
