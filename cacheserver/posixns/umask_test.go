package posixns

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/namespace"
)

// setDefaultACL gives dir the default ACL u::rwx,g::r-x,o::---,u:2000:rwx
// (and its mask, rwx) through its extended attribute, and skips the test
// when the file system has no POSIX ACLs.
func setDefaultACL(t *testing.T, dir string) {
	t.Helper()
	const noID = 0xffffffff
	b := binary.LittleEndian.AppendUint32(nil, 2)
	// Tag, permissions, id; sorted by tag: user_obj, user, group_obj, mask, other.
	for _, e := range [][3]uint32{{0x01, 7, noID}, {0x02, 7, 2000}, {0x04, 5, noID}, {0x10, 7, noID}, {0x20, 0, noID}} {
		b = binary.LittleEndian.AppendUint16(b, uint16(e[0]))
		b = binary.LittleEndian.AppendUint16(b, uint16(e[1]))
		b = binary.LittleEndian.AppendUint32(b, e[2])
	}
	err := syscall.Setxattr(dir, "system.posix_acl_default", b, 0)
	if errors.Is(err, syscall.EOPNOTSUPP) {
		t.Skipf("the file system of %s has no POSIX ACLs", dir)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// aclMask returns the permissions of the mask entry of p's access ACL, -1
// when p has none.
func aclMask(t *testing.T, p string) int {
	t.Helper()
	b := make([]byte, 256)
	n, err := syscall.Getxattr(p, "system.posix_acl_access", b)
	if errors.Is(err, syscall.ENODATA) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	for e := b[4:n]; len(e) >= 8; e = e[8:] {
		if binary.LittleEndian.Uint16(e) == 0x10 {
			return int(binary.LittleEndian.Uint16(e[2:]))
		}
	}
	return -1
}

// TestCreationsTakeTheCallersUmaskOrTheDefaultACL proves that a new file,
// directory or FIFO gets what the caller's own creation gets: the mode less
// the caller's umask, whatever the server's umask, and under a directory
// with a default ACL the mode and mask that the ACL gives. A mode set after
// the creation turned a file under an ACL that denies other users into a
// world-readable one, and took write access from the ACL's named user.
func TestCreationsTakeTheCallersUmaskOrTheDefaultACL(t *testing.T) {
	needRoot(t)
	fsys, dir := newFS(t)
	for _, d := range []string{"plain", "acl"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o777); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(dir, d), 0o777)
	}
	setDefaultACL(t, filepath.Join(dir, "acl"))
	creations := map[string]struct {
		mk   func(ctx context.Context, p string) (namespace.Attr, error)
		mode uint32
	}{
		"create": {func(ctx context.Context, p string) (namespace.Attr, error) {
			return fsys.Create(ctx, p, os.O_RDWR, 0o666)
		}, 0o666},
		"mkdir": {func(ctx context.Context, p string) (namespace.Attr, error) { return fsys.Mkdir(ctx, p, 0o777) }, 0o777},
		"mkfifo": {func(ctx context.Context, p string) (namespace.Attr, error) {
			return fsys.Mknod(ctx, p, syscall.S_IFIFO|0o666, 0)
		}, 0o666},
	}
	tests := map[string]struct {
		ctx context.Context
		dir string
		// want is the permission bits of the new file, given those asked
		// for; wantMask the mask entry of its access ACL, -1 for none.
		want     func(mode uint32) uint32
		wantMask func(mode uint32) int
	}{
		"umask 022": {
			ctx: ident.WithUmask(asNobody(), 0o022), dir: "plain",
			want: func(m uint32) uint32 { return m &^ 0o022 }, wantMask: func(uint32) int { return -1 },
		},
		"umask 027, which no server has": {
			ctx: ident.WithUmask(asNobody(), 0o027), dir: "plain",
			want: func(m uint32) uint32 { return m &^ 0o027 }, wantMask: func(uint32) int { return -1 },
		},
		"no umask: the mode asked for": {
			ctx: asNobody(), dir: "plain",
			want: func(m uint32) uint32 { return m }, wantMask: func(uint32) int { return -1 },
		},
		"the process, umask 077": {
			ctx: ident.WithUmask(context.Background(), 0o077), dir: "plain",
			want: func(m uint32) uint32 { return m &^ 0o077 }, wantMask: func(uint32) int { return -1 },
		},
		// u::rwx g::r-x(mask rwx) o::---: the group bits are the mask,
		// which keeps what the mode asked for, and the umask is ignored.
		"default ACL, umask 022": {
			ctx: ident.WithUmask(asNobody(), 0o022), dir: "acl",
			want: func(m uint32) uint32 { return m & 0o770 }, wantMask: func(m uint32) int { return int(m>>3) & 7 },
		},
		"default ACL, umask 077": {
			ctx: ident.WithUmask(asNobody(), 0o077), dir: "acl",
			want: func(m uint32) uint32 { return m & 0o770 }, wantMask: func(m uint32) int { return int(m>>3) & 7 },
		},
	}
	for name, tc := range tests {
		for op, c := range creations {
			t.Run(name+"/"+op, func(t *testing.T) {
				p := filepath.Join(tc.dir, op+" "+name)
				a, err := c.mk(tc.ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := a.Mode&0o7777, tc.want(c.mode); got != want {
					t.Errorf("mode %o, want %o", got, want)
				}
				var st syscall.Stat_t
				if err := syscall.Lstat(filepath.Join(dir, p), &st); err != nil || st.Mode != a.Mode {
					t.Errorf("the backing file has mode %o (%v), the answer %o", st.Mode, err, a.Mode)
				}
				if got, want := aclMask(t, filepath.Join(dir, p)), tc.wantMask(c.mode); got != want {
					t.Errorf("ACL mask %o, want %o", got, want)
				}
			})
		}
	}
}

// TestCreationsInASetgidDirectory proves that a new directory in a setgid
// directory keeps the setgid bit and group it inherits, whatever the umask.
func TestCreationsInASetgidDirectory(t *testing.T) {
	needRoot(t)
	fsys, dir := newFS(t)
	sgid := filepath.Join(dir, "sgid")
	if err := os.Mkdir(sgid, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(sgid, 0, 3000); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Chmod(sgid, syscall.S_ISGID|0o777); err != nil {
		t.Fatal(err)
	}
	ctx := ident.WithUmask(asNobody(), 0o027)
	d, err := fsys.Mkdir(ctx, "sgid/d", 0o777)
	if err != nil || d.Mode != syscall.S_IFDIR|syscall.S_ISGID|0o750 || d.GID != 3000 {
		t.Errorf("Mkdir = mode %o gid %d, %v; want mode %o gid 3000", d.Mode, d.GID, err, syscall.S_IFDIR|syscall.S_ISGID|0o750)
	}
	f, err := fsys.Create(ctx, "sgid/f", os.O_RDWR, 0o666)
	if err != nil || f.Mode != syscall.S_IFREG|0o640 || f.GID != 3000 {
		t.Errorf("Create = mode %o gid %d, %v; want mode %o gid 3000", f.Mode, f.GID, err, syscall.S_IFREG|0o640)
	}
}
