package posix

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/ident"
)

// daemon owns the private directory of the permission test.
var daemon = ident.Cred{UID: 1, GID: 1, Groups: []uint32{1}}

// privateTree makes backing/private, a 0700 directory of daemon holding a
// readable file, and returns the paths of both through the mount.
func privateTree(t *testing.T, dir, backing string) (privDir, privFile string) {
	t.Helper()
	p := filepath.Join(backing, "private")
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(p, "data"), "secret", 0o644)
	for _, name := range []string{p, filepath.Join(p, "data")} {
		if err := os.Chown(name, int(daemon.UID), int(daemon.GID)); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "private"), filepath.Join(dir, "private", "data")
}

// TestPrivateDirectory checks that a file under a 0700 directory of another
// user can be neither read nor listed through the mount, when the namespace
// acts as each caller and when it acts as a fixed identity. The clients that
// must be served are the control that proves the refusals are not blanket
// ones.
func TestPrivateDirectory(t *testing.T) {
	root := ident.Cred{}
	tests := map[string]struct {
		as              *ident.Cred
		denied, allowed []ident.Cred
	}{
		"acting as the caller":             {nil, []ident.Cred{nobody}, []ident.Cred{daemon, root}},
		"acting as a fixed other identity": {&nobody, []ident.Cred{nobody, daemon, root}, nil},
		"acting as the owner":              {&daemon, nil, []ident.Cred{nobody, daemon, root}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var opts []mountOption
			if tc.as != nil {
				opts = append(opts, actingAs(*tc.as))
			}
			dir, backing := mountUnderTest(t, opts...)
			privDir, privFile := privateTree(t, dir, backing)
			write(t, filepath.Join(backing, "public"), "public", 0o644)
			var refused []ident.Cred
			if tc.as != nil && fixedServesOnlyItself[currentName] {
				tc.denied, refused = splitServed(tc.denied, *tc.as)
				tc.allowed, refused = splitServed(tc.allowed, *tc.as, refused...)
			}
			for _, c := range refused {
				if e := runAs(t, c, "read", filepath.Join(dir, "public")); e != syscall.EACCES {
					t.Errorf("read of a public file as %s, which may not borrow %s: %v, want EACCES", c, *tc.as, e)
				}
			}
			for _, c := range tc.denied {
				if e := runAs(t, c, "read", privFile); e != syscall.EACCES {
					t.Errorf("read as %s: %v, want EACCES", c, e)
				}
				if e := runAs(t, c, "list", privDir); e != syscall.EACCES {
					t.Errorf("list as %s: %v, want EACCES", c, e)
				}
				if e := runAs(t, c, "read", filepath.Join(dir, "public")); e != 0 {
					t.Errorf("read of a public file as %s: %v, want success", c, e)
				}
			}
			for _, c := range tc.allowed {
				if e := runAs(t, c, "read", privFile); e != 0 {
					t.Errorf("read as %s: %v, want success", c, e)
				}
				if e := runAs(t, c, "list", privDir); e != 0 {
					t.Errorf("list as %s: %v, want success", c, e)
				}
			}
		})
	}
}

// splitServed splits cs into the callers a fixed identity as serves (that
// uid and root) and the others, appended to refused.
func splitServed(cs []ident.Cred, as ident.Cred, refused ...ident.Cred) (served, refusedOut []ident.Cred) {
	for _, c := range cs {
		if c.UID == as.UID || c.UID == 0 {
			served = append(served, c)
		} else {
			refused = append(refused, c)
		}
	}
	return served, refused
}

// TestRootClientActingAsOther checks that with a fixed unprivileged
// identity even root on the client cannot read the private directory.
func TestRootClientActingAsOther(t *testing.T) {
	dir, backing := mountUnderTest(t, actingAs(nobody))
	privDir, privFile := privateTree(t, dir, backing)
	if _, err := os.ReadFile(privFile); !os.IsPermission(err) {
		t.Errorf("root reads the private file: %v, want EACCES", err)
	}
	if _, err := os.ReadDir(privDir); !os.IsPermission(err) {
		t.Errorf("root lists the private directory: %v, want EACCES", err)
	}
}

// TestChecksWithoutDefaultPermissions checks what a root FUSE daemon without
// default_permissions would skip: write permission on the directory for
// unlink and rename, the sticky bit, and the clearing of setuid and setgid
// bits on write and truncate by another user.
func TestChecksWithoutDefaultPermissions(t *testing.T) {
	both(t, func(t *testing.T, dir, backing string) {
		p := func(name string) string { return filepath.Join(dir, name) }
		if err := os.Mkdir(p("ro"), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, p("ro/f"), "x", 0o666)
		if err := os.Mkdir(p("sticky"), 0o777); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Chmod(p("sticky"), 0o1777); err != nil {
			t.Fatal(err)
		}
		write(t, p("sticky/roots"), "x", 0o666)
		write(t, p("suid"), "x", 0o6777)
		write(t, p("suid-trunc"), "x", 0o6777)
		tests := map[string]struct {
			args []string
			want syscall.Errno
		}{
			"unlink in a directory without write permission": {[]string{"unlink", p("ro/f")}, syscall.EACCES},
			"rename out of it": {[]string{"rename", p("ro/f"), p("sticky/moved")}, syscall.EACCES},
			"unlink another's file in a sticky directory": {[]string{"unlink", p("sticky/roots")}, syscall.EPERM},
			"rename another's file in a sticky directory": {[]string{"rename", p("sticky/roots"), p("sticky/mine")}, syscall.EPERM},
			"create in a sticky directory":                {[]string{"create", p("sticky/new")}, 0},
			"write to a world-writable setuid file":       {[]string{"write", p("suid")}, 0},
			"truncate a world-writable setuid file":       {[]string{"truncate", p("suid-trunc")}, 0},
		}
		for name, tc := range tests {
			if e := runAs(t, nobody, tc.args...); e != tc.want {
				t.Errorf("%s as nobody: %v, want %v", name, e, tc.want)
			}
		}
		if e := runAs(t, nobody, "unlink", p("sticky/new")); e != 0 {
			t.Errorf("unlink of one's own file in a sticky directory: %v", e)
		}
		for _, name := range []string{p("suid"), filepath.Join(backing, "suid"), p("suid-trunc")} {
			if fi, err := os.Stat(name); err != nil || fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
				t.Errorf("%s after a write by another user: %v, %v; want setuid and setgid cleared", name, fi.Mode(), err)
			}
		}
	})
}

// TestSupplementaryGroups checks that a caller's supplementary groups, which
// the FUSE header does not carry, count for the permission checks.
func TestSupplementaryGroups(t *testing.T) {
	dir, backing := mountUnderTest(t)
	const group = 4242
	shared := filepath.Join(backing, "group-only")
	if err := os.Mkdir(shared, 0o070); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(shared, 0, group); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Chmod(shared, 0o070); err != nil {
		t.Fatal(err)
	}
	member := ident.Cred{UID: nobody.UID, GID: nobody.GID, Groups: []uint32{nobody.GID, group}}
	if e := runAs(t, member, "list", filepath.Join(dir, "group-only")); e != 0 {
		t.Errorf("list as a member through a supplementary group: %v, want success", e)
	}
	if e := runAs(t, nobody, "list", filepath.Join(dir, "group-only")); e != syscall.EACCES {
		t.Errorf("list as a non-member: %v, want EACCES", e)
	}
}

// TestPrivateAncestorOfTheBacking checks that the directories above the
// backing directory count for a namespace acting as each caller, as they
// would for a job that used the backing file system directly: a caller who
// may not search them reaches nothing through the mount, although the
// server itself holds the backing directory open. The owner of the private
// ancestor is the control that proves the refusals are not blanket ones.
func TestPrivateAncestorOfTheBacking(t *testing.T) {
	parent := filepath.Join(publicTempDir(t), "private")
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, backing := mountUnderTest(t, backingIn(parent))
	write(t, filepath.Join(backing, "file"), "data", 0o644)
	if err := os.Mkdir(filepath.Join(backing, "open"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(backing, "open"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(parent, int(daemon.UID), int(daemon.GID)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	ops := map[string]func(who string) []string{
		"stat":   func(string) []string { return []string{"stat", filepath.Join(dir, "file")} },
		"read":   func(string) []string { return []string{"read", filepath.Join(dir, "file")} },
		"list":   func(string) []string { return []string{"list", filepath.Join(dir, "open")} },
		"create": func(who string) []string { return []string{"create", filepath.Join(dir, "open", who)} },
	}
	for name, args := range ops {
		if e := runAs(t, nobody, args("nobody")...); e != syscall.EACCES {
			t.Errorf("%s under a private ancestor as %s: %v, want EACCES", name, nobody, e)
		}
		if e := runAs(t, daemon, args("daemon")...); e != 0 {
			t.Errorf("%s under a private ancestor as its owner %s: %v, want success", name, daemon, e)
		}
	}
}

// TestBackingDirectoryReplacedByALink checks that the cache keeps serving
// the backing directory it was started on when a user who may write its
// parent renames it and puts a symbolic link to another directory in its
// place: the data written through the mount goes back to the directory
// served, never through the link to a directory the instance was not given.
func TestBackingDirectoryReplacedByALink(t *testing.T) {
	dir, backing := mountUnderTest(t)
	write(t, filepath.Join(dir, "before"), "first", 0o644)
	settleBacking(t, dir)
	moved, other := backing+".moved", backing+".other"
	if err := os.Rename(backing, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(other, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(other), backing); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "after"), "second", 0o644)
	write(t, filepath.Join(dir, "before"), "rewritten", 0o644)
	settleBacking(t, dir)
	if entries, err := os.ReadDir(other); err != nil || len(entries) != 0 {
		t.Errorf("the directory the link leads to holds %v (%v), want nothing", entries, err)
	}
	for name, want := range map[string]string{"after": "second", "before": "rewritten"} {
		if got, err := os.ReadFile(filepath.Join(moved, name)); err != nil || string(got) != want {
			t.Errorf("%s in the directory served = %q, %v; want %q", name, got, err, want)
		}
	}
}

// TestTrustedXattrNamesStayHidden checks that a caller without privileges
// does not see the names of a file's trusted extended attributes, which
// the kernel lists only to holders of CAP_SYS_ADMIN: a server that runs as
// root would see them, and the caller's kernel passes on what the mount
// lists. Root, the control, sees them.
func TestTrustedXattrNamesStayHidden(t *testing.T) {
	dir, backing := mountUnderTest(t)
	write(t, filepath.Join(backing, "f"), "data", 0o644)
	if err := unix.Setxattr(filepath.Join(backing, "f"), "trusted.hidden", []byte("v"), 0); err != nil {
		t.Skipf("the backing file system keeps no trusted attributes: %v", err)
	}
	if e := runAs(t, nobody, "list-trusted", filepath.Join(dir, "f")); e != 0 {
		t.Errorf("listxattr as %s: %v, want no trusted name", nobody, e)
	}
	if e := runAs(t, ident.Cred{}, "list-trusted", filepath.Join(dir, "f")); e != syscall.EEXIST {
		t.Errorf("listxattr as root: %v, want the trusted name (EEXIST)", e)
	}
}

// rootWithoutCaps is root that dropped every capability, as a container
// started with "capabilities: drop: [ALL]" runs.
var rootWithoutCaps = ident.Cred{HasCaps: true}

// withCaps returns c holding exactly the capabilities ns.
func withCaps(c ident.Cred, ns ...int) ident.Cred {
	c.HasCaps = true
	for _, n := range ns {
		c.Caps |= 1 << uint(n)
	}
	return c
}

// capsFixture makes, in base, what a case of TestCallersCapabilities works
// on, owned by daemon, and returns the path of its operand beneath base.
type capsFixture func(t *testing.T, base string) string

func daemonFile(name string, mode uint32) capsFixture {
	return func(t *testing.T, base string) string {
		p := filepath.Join(base, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, p, "secret", os.FileMode(mode))
		if err := os.Chown(p, int(daemon.UID), int(daemon.GID)); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return name
	}
}

func daemonDir(name string, mode uint32, then capsFixture) capsFixture {
	return func(t *testing.T, base string) string {
		p := filepath.Join(base, name)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		rel := then(t, base)
		if err := os.Chown(p, int(daemon.UID), int(daemon.GID)); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return rel
	}
}

// TestCallersCapabilities checks that the capabilities of a caller acting
// as itself decide what it may do through the mount, as they decide it on
// the backing file system, rather than its uid: root that dropped them all
// is refused a file of another user, and a user granted one is allowed
// what it allows. Every case runs on its own copy of the files, on the
// backing directory and through the mount, and wants the same errno from
// both.
func TestCallersCapabilities(t *testing.T) {
	dir, backing := mountUnderTest(t)
	private := func(then capsFixture) capsFixture { return daemonDir("private", 0o700, then) }
	tests := map[string]struct {
		cred  ident.Cred
		op    string
		fix   capsFixture
		extra string
		want  syscall.Errno
	}{
		"root without caps reads a 0600 file":           {rootWithoutCaps, "read", daemonFile("f", 0o600), "", syscall.EACCES},
		"root without caps reads in a 0700 directory":   {rootWithoutCaps, "read", private(daemonFile("private/f", 0o644)), "", syscall.EACCES},
		"root without caps lists a 0700 directory":      {rootWithoutCaps, "list", private(func(*testing.T, string) string { return "private" }), "", syscall.EACCES},
		"root without caps creates in a 0700 directory": {rootWithoutCaps, "create", private(func(*testing.T, string) string { return "private/new" }), "", syscall.EACCES},
		"root without caps writes a 0644 file":          {rootWithoutCaps, "write", daemonFile("f", 0o644), "", syscall.EACCES},
		"root without caps chowns":                      {rootWithoutCaps, "chown", daemonFile("f", 0o644), "", syscall.EPERM},
		"root without caps chmods":                      {rootWithoutCaps, "chmod", daemonFile("f", 0o644), "", syscall.EPERM},
		"root without caps unlinks in a sticky directory": {rootWithoutCaps, "unlink",
			daemonDir("sticky", 0o1777, daemonFile("sticky/f", 0o666)), "", syscall.EPERM},
		"root without caps renames in a sticky directory": {rootWithoutCaps, "rename",
			daemonDir("sticky", 0o1777, daemonFile("sticky/f", 0o666)), "sticky/g", syscall.EPERM},
		"root with CAP_DAC_READ_SEARCH reads a 0600 file": {withCaps(ident.Cred{}, unix.CAP_DAC_READ_SEARCH), "read", daemonFile("f", 0o600), "", 0},
		"root with CAP_DAC_READ_SEARCH writes a 0644 file": {withCaps(ident.Cred{}, unix.CAP_DAC_READ_SEARCH), "write",
			daemonFile("f", 0o644), "", syscall.EACCES},
		"a user with CAP_DAC_OVERRIDE reads a 0600 file": {withCaps(nobody, unix.CAP_DAC_OVERRIDE), "read", daemonFile("f", 0o600), "", 0},
		"a user with CAP_FOWNER chmods":                  {withCaps(nobody, unix.CAP_FOWNER), "chmod", daemonFile("f", 0o644), "", 0},
		"a user with CAP_CHOWN chowns":                   {withCaps(nobody, unix.CAP_CHOWN), "chown", daemonFile("f", 0o644), "", 0},
		"a user with CAP_FOWNER unlinks in a sticky directory": {withCaps(nobody, unix.CAP_FOWNER), "unlink",
			daemonDir("sticky", 0o1777, daemonFile("sticky/f", 0o666)), "", 0},
	}
	n := 0
	for name, tc := range tests {
		n++
		for _, where := range []struct{ base, top string }{{backing, backing}, {backing, dir}} {
			sub := fmt.Sprintf("case%d-%s", n, filepath.Base(where.top))
			base := filepath.Join(where.base, sub)
			if err := os.Mkdir(base, 0o755); err != nil {
				t.Fatal(err)
			}
			args := []string{tc.op, filepath.Join(where.top, sub, tc.fix(t, base))}
			if tc.extra != "" {
				args = append(args, filepath.Join(where.top, sub, tc.extra))
			}
			if e := runAs(t, tc.cred, args...); e != tc.want {
				t.Errorf("%s, on %s: %v, want %v", name, where.top, e, tc.want)
			}
		}
	}
}

// TestRootOfAUserNamespace checks that a user who made a user namespace
// of its own, and is root there with every capability, gets none of them
// through the mount for files of others, as it gets none on the backing
// file system: there they count only for files whose owner the namespace
// maps. Each case runs on the backing directory and through the mount and
// wants the same errno from both; reading a public file is the control.
func TestRootOfAUserNamespace(t *testing.T) {
	dir, backing := mountUnderTest(t)
	tests := map[string]struct {
		op   string
		fix  capsFixture
		want syscall.Errno
	}{
		"read a 0600 file":      {"read", daemonFile("f", 0o600), syscall.EACCES},
		"list a 0700 directory": {"list", daemonDir("private", 0o700, func(*testing.T, string) string { return "private" }), syscall.EACCES},
		"write a 0644 file":     {"write", daemonFile("f", 0o644), syscall.EACCES},
		"chmod a file":          {"chmod", daemonFile("f", 0o644), syscall.EPERM},
		"read a 0644 file":      {"read", daemonFile("f", 0o644), 0},
	}
	n := 0
	for name, tc := range tests {
		n++
		for _, top := range []string{backing, dir} {
			sub := fmt.Sprintf("case%d-%s", n, filepath.Base(top))
			base := filepath.Join(backing, sub)
			if err := os.Mkdir(base, 0o755); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(top, sub, tc.fix(t, base))
			if e := runAsRootOfUserNamespace(t, nobody.UID, nobody.GID, tc.op, p); e != tc.want {
				t.Errorf("%s as root of a user namespace of %s, on %s: %v, want %v", name, nobody, top, e, tc.want)
			}
		}
	}
}

// TestCapabilitiesDroppedMidway checks that root that used the mount and
// then dropped its capabilities, in the same thread, is refused a file of
// another user right away, as on the backing file system.
func TestCapabilitiesDroppedMidway(t *testing.T) {
	dir, backing := mountUnderTest(t)
	for _, top := range []string{backing, dir} {
		sub := "case-" + filepath.Base(top)
		base := filepath.Join(backing, sub)
		if err := os.Mkdir(base, 0o755); err != nil {
			t.Fatal(err)
		}
		public := filepath.Join(top, sub, daemonFile("public", 0o644)(t, base))
		private := filepath.Join(top, sub, daemonFile("private", 0o600)(t, base))
		if e := runAs(t, ident.Cred{}, "read-after-drop", public, private); e != syscall.EACCES {
			t.Errorf("read of a 0600 file of %s by root that dropped its capabilities, on %s: %v, want EACCES", daemon, top, e)
		}
	}
}

// TestWriteByRootWithoutCapsClearsSetid checks that a write through the
// mount by root without CAP_FSETID clears the setuid and setgid bits of
// the file, as the kernel clears them for such a writer on the backing
// file system, even when the data stays in the cache. Root with its
// capabilities, the control, keeps them.
func TestWriteByRootWithoutCapsClearsSetid(t *testing.T) {
	both(t, func(t *testing.T, dir, backing string) {
		for _, tc := range []struct {
			cred ident.Cred
			kept os.FileMode
		}{{rootWithoutCaps, 0}, {ident.Cred{}, os.ModeSetuid | os.ModeSetgid}} {
			for _, top := range []string{backing, dir} {
				name := fmt.Sprintf("suid-%s-%v", filepath.Base(top), tc.cred.HasCaps)
				write(t, filepath.Join(backing, name), "x", 0o6777)
				if err := os.Chown(filepath.Join(backing, name), int(daemon.UID), int(daemon.GID)); err != nil {
					t.Fatal(err)
				}
				if err := syscall.Chmod(filepath.Join(backing, name), 0o6777); err != nil {
					t.Fatal(err)
				}
				if e := runAs(t, tc.cred, "write", filepath.Join(top, name)); e != 0 {
					t.Fatalf("write as %s: %v", tc.cred, e)
				}
				fi, err := os.Stat(filepath.Join(top, name))
				if err != nil || fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != tc.kept {
					t.Errorf("%s after a write as %s: %v, %v; want setuid and setgid %v", filepath.Join(top, name), tc.cred, fi.Mode(), err, tc.kept)
				}
			}
		}
	})
}
