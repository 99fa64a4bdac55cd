package integration

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// Tags of the entries of a POSIX ACL in its extended attribute.
const (
	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclMask     = 0x10
	aclOther    = 0x20
)

// setDefaultACL gives dir the default ACL u::rwx,g::r-x,o::---,u:2000:rwx
// (and the mask setfacl adds, rwx), written as the kernel's extended
// attribute: version 2, then entries of tag, permissions and id, sorted by
// tag. It skips the test when the file system has no POSIX ACLs.
func setDefaultACL(t *testing.T, dir string) {
	t.Helper()
	const noID = 0xffffffff
	b := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range [][3]uint32{
		{aclUserObj, 7, noID}, {aclUser, 7, 2000}, {aclGroupObj, 5, noID}, {aclMask, 7, noID}, {aclOther, 0, noID},
	} {
		b = binary.LittleEndian.AppendUint16(b, uint16(e[0]))
		b = binary.LittleEndian.AppendUint16(b, uint16(e[1]))
		b = binary.LittleEndian.AppendUint32(b, e[2])
	}
	err := unix.Setxattr(dir, "system.posix_acl_default", b, 0)
	if errors.Is(err, unix.EOPNOTSUPP) {
		t.Skipf("the file system of %s has no POSIX ACLs", dir)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// created is what the tests compare of a new file: all its mode (in
// octal), its owner and its access ACL (aclText).
type created struct {
	Mode     string
	UID, GID uint32
	ACL      string
}

// aclText spells the ACL b, an extended attribute as setDefaultACL writes
// it, as getfacl -c does on one line.
func aclText(b []byte) string {
	tags := map[uint16]string{aclUserObj: "u:", aclUser: "u:", aclGroupObj: "g:", 0x08: "g:", aclMask: "m:", aclOther: "o:"}
	var entries []string
	for b = b[4:]; len(b) >= 8; b = b[8:] {
		tag, perm, id := binary.LittleEndian.Uint16(b), binary.LittleEndian.Uint16(b[2:]), binary.LittleEndian.Uint32(b[4:])
		s := tags[tag]
		if id != 0xffffffff {
			s += fmt.Sprint(id)
		}
		s += ":"
		for i, c := range "rwx" {
			if perm&(4>>i) != 0 {
				s += string(c)
			} else {
				s += "-"
			}
		}
		entries = append(entries, s)
	}
	return strings.Join(entries, ",")
}

func createdAs(t *testing.T, p string) created {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	c := created{Mode: fmt.Sprintf("%o", st.Mode), UID: st.Uid, GID: st.Gid}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return c
	}
	b := make([]byte, 256)
	n, err := unix.Lgetxattr(p, "system.posix_acl_access", b)
	switch {
	case errors.Is(err, unix.ENODATA):
	case err != nil:
		t.Fatal(err)
	default:
		c.ACL = aclText(b[:n])
	}
	return c
}

// TestNewFilesGetTheModeOfADirectCreate has a user create files, a
// directory, a FIFO and a symbolic link, with two umasks, in a directory
// with a default ACL, in a setgid directory and in a plain one, once
// directly and once through the mount, and compares their modes, owners and
// access ACLs. Through a mount that applied the umask itself and then the
// servers that set the mode asked for, a file under the default ACL, which
// denies other users, came out world-readable, and the named user lost
// write access.
func TestNewFilesGetTheModeOfADirectCreate(t *testing.T) {
	requireFUSE(t)
	tests := map[string]struct {
		upArgs []string
	}{
		"root servers act as each caller": {upArgs: []string{"--act-as-caller"}},
		"with the client cache":           {upArgs: []string{"--act-as-caller", "--client-cache"}},
		"servers act as uid 1000":         {upArgs: []string{"--uid", "1000", "--gid", "1000"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := dirs(t)
			direct := filepath.Join(filepath.Dir(in.backing), "direct")
			for _, d := range []string{filepath.Dir(in.backing), filepath.Dir(filepath.Dir(in.backing))} {
				os.Chmod(d, 0o755)
			}
			for _, root := range []string{in.backing, direct} {
				makeCreationDirs(t, root)
			}
			up(t, in, 2, tc.upArgs...)
			for _, root := range []string{direct, in.mount} {
				for _, umask := range []string{"022", "077"} {
					script := "umask " + umask + " && for d in acl sgid plain; do " +
						"echo x > $d/f" + umask + " && mkdir $d/d" + umask + " && mkfifo $d/p" + umask +
						" && ln -s f $d/l" + umask + " || exit 1; done"
					if out, ok := asUser(1000, 1000, "sh", "-c", "cd "+root+" && "+script); !ok {
						t.Fatalf("creating in %s with umask %s: %s", root, umask, out)
					}
				}
			}
			for _, d := range []string{"acl", "sgid", "plain"} {
				for _, umask := range []string{"022", "077"} {
					for _, kind := range []string{"f", "d", "p", "l"} {
						p := filepath.Join(d, kind+umask)
						want, got := createdAs(t, filepath.Join(direct, p)), createdAs(t, filepath.Join(in.backing, p))
						if diff := cmp.Diff(want, got); diff != "" {
							t.Errorf("%s through the mount (-direct +mount):\n%s", p, diff)
						}
					}
				}
			}
			// The comparison proves nothing unless the default ACL works.
			if got := createdAs(t, filepath.Join(direct, "acl/f022")); got.Mode != "100660" || got.ACL == "" {
				t.Fatalf("a direct create under the default ACL gave %+v, want mode 100660 and an access ACL", got)
			}
		})
	}
}

// makeCreationDirs makes, under root, the directories that every user may
// create in: acl, with a default ACL, sgid, setgid and of group 3000, and
// plain.
func makeCreationDirs(t *testing.T, root string) {
	t.Helper()
	for _, d := range []string{"", "acl", "sgid", "plain"} {
		p := filepath.Join(root, d)
		if err := os.MkdirAll(p, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	sgid := filepath.Join(root, "sgid")
	if err := os.Chown(sgid, 0, 3000); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(sgid, unix.S_ISGID|0o777); err != nil {
		t.Fatal(err)
	}
	setDefaultACL(t, filepath.Join(root, "acl"))
}
