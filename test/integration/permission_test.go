package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// asUser runs a command as uid:gid and returns its output and whether it
// succeeded.
func asUser(uid, gid uint32, name string, args ...string) (string, bool) {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

// TestPrivateDirectoryStaysPrivate puts a file in a 0700 directory of
// another user on the backing store and checks that nobody else can list or
// read it through the mount: with servers acting as one configured user,
// and with a shared root server acting as each caller.
func TestPrivateDirectoryStaysPrivate(t *testing.T) {
	requireFUSE(t)
	tests := map[string]struct {
		upArgs []string
		// reader is the identity of the process that tries.
		reader uint32
		// ownerReads says the owner of the directory reads it through the
		// mount in this set-up.
		ownerReads bool
	}{
		"servers act as uid 1000":                       {upArgs: []string{"--uid", "1000", "--gid", "1000"}, reader: 0},
		"root servers act as each caller":               {upArgs: []string{"--act-as-caller"}, reader: 1000, ownerReads: true},
		"root servers act as each caller, client cache": {upArgs: []string{"--act-as-caller", "--client-cache"}, reader: 1000, ownerReads: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := dirs(t)
			for _, d := range []string{filepath.Dir(in.backing), filepath.Dir(filepath.Dir(in.backing))} {
				os.Chmod(d, 0o755)
			}
			private := filepath.Join(in.backing, "private")
			os.Mkdir(private, 0o700)
			os.WriteFile(filepath.Join(private, "secret"), []byte("only for 2000\n"), 0o644)
			os.Chown(filepath.Join(private, "secret"), 2000, 2000)
			os.Mkdir(filepath.Join(private, "sub"), 0o755)
			os.Chown(filepath.Join(private, "sub"), 2000, 2000)
			os.Chown(private, 2000, 2000)
			up(t, in, 2, tc.upArgs...)
			mnt := func(p string) string { return filepath.Join(in.mount, p) }
			if tc.ownerReads {
				// The owner's walk must not leave names that another
				// user's walk would take without a search check.
				if out, ok := asUser(2000, 2000, "stat", mnt("private/sub"), mnt("private/secret")); !ok {
					t.Errorf("the owner's stat: %q", out)
				}
			}
			for _, p := range []string{"private/sub", "private/secret"} {
				if out, ok := asUser(tc.reader, tc.reader, "stat", mnt(p)); ok || !strings.Contains(out, "ermission denied") {
					t.Errorf("stat of %s as %d: ok=%v, %q; want permission denied", p, tc.reader, ok, out)
				}
			}
			if out, ok := asUser(tc.reader, tc.reader, "ls", mnt("private")); ok || !strings.Contains(out, "ermission denied") {
				t.Errorf("listing the private directory as %d: ok=%v, %q; want permission denied", tc.reader, ok, out)
			}
			if out, ok := asUser(tc.reader, tc.reader, "cat", mnt("private/secret")); ok || !strings.Contains(out, "ermission denied") {
				t.Errorf("reading the private file as %d: ok=%v, %q; want permission denied", tc.reader, ok, out)
			}
			if tc.ownerReads {
				if out, ok := asUser(2000, 2000, "cat", mnt("private/secret")); !ok || out != "only for 2000\n" {
					t.Errorf("the owner reading its file: ok=%v, %q", ok, out)
				}
			}
		})
	}
}

// TestOtherUsersCannotBorrowTheInstanceIdentity checks that a mount never
// lends its backing-store identity to another local user: by default a cache
// started by root acts as each caller, and a cache acting as one configured
// user refuses every other user, even for files that user could read.
func TestOtherUsersCannotBorrowTheInstanceIdentity(t *testing.T) {
	requireFUSE(t)
	tests := map[string]struct {
		upArgs []string
		// owner owns the file (mode 0600); reader is refused.
		owner, reader uint32
	}{
		"root's default acts as each caller":       {owner: 0, reader: 2000},
		"servers acting as uid 1000 refuse others": {upArgs: []string{"--uid", "1000", "--gid", "1000"}, owner: 1000, reader: 2000},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := dirs(t)
			for _, d := range []string{filepath.Dir(in.backing), filepath.Dir(filepath.Dir(in.backing))} {
				os.Chmod(d, 0o755)
			}
			file := filepath.Join(in.backing, "mine")
			os.WriteFile(file, []byte("owner only\n"), 0o600)
			os.Chown(file, int(tc.owner), int(tc.owner))
			up(t, in, 1, tc.upArgs...)
			mnt := filepath.Join(in.mount, "mine")
			if out, ok := asUser(tc.owner, tc.owner, "cat", mnt); !ok || out != "owner only\n" {
				t.Fatalf("the owner %d reading its file: ok=%v, %q", tc.owner, ok, out)
			}
			if out, ok := asUser(tc.reader, tc.reader, "cat", mnt); ok || !strings.Contains(out, "ermission denied") {
				t.Errorf("reading a 0600 file of %d as %d: ok=%v, %q; want permission denied", tc.owner, tc.reader, ok, out)
			}
		})
	}
}

// asCaller runs sh -c script as uid:gid with the supplementary groups,
// with $F set to file, and returns its output and whether it succeeded.
func asCaller(uid, gid uint32, groups []uint32, script, file string) (string, bool) {
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), "F="+file)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: groups}}
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

// TestSetidBitsGoAsInAPlainDirectory makes the same files in a plain
// directory and on the backing store, has the same callers write, truncate
// and chown them in both, and compares the modes: the servers act as each
// caller, and the kernel's rules for clearing setuid and setgid must hold
// through the mount as they hold without it (since Linux 6.2, a writer
// outside the file's group clears setgid even without group execute, and
// a chown that changes neither owner nor group clears them as well).
func TestSetidBitsGoAsInAPlainDirectory(t *testing.T) {
	requireFUSE(t)
	const write, rdwr = `echo x >> "$F"`, `exec 3<>"$F" && echo x >&3`
	tests := map[string]struct {
		uid, gid uint32
		mode     uint32
		dir      bool
		caller   uint32
		groups   []uint32
		script   string
	}{
		"write outside the group, setgid without group execute": {uid: 2000, gid: 3000, mode: 0o2766, caller: 1000, script: write},
		"read-write outside the group":                          {uid: 2000, gid: 3000, mode: 0o2766, caller: 1000, script: rdwr},
		"write by the owner outside the group":                  {uid: 1000, gid: 3000, mode: 0o2766, caller: 1000, script: write},
		"write by a member keeps setgid without group execute":  {uid: 2000, gid: 3000, mode: 0o2766, caller: 1000, groups: []uint32{3000}, script: write},
		"write clears setuid and group-executable setgid":       {uid: 2000, gid: 3000, mode: 0o6777, caller: 1000, groups: []uint32{3000}, script: write},
		"truncate outside the group":                            {uid: 2000, gid: 3000, mode: 0o2766, caller: 1000, script: `truncate -s 1 "$F"`},
		"open for truncation outside the group":                 {uid: 2000, gid: 3000, mode: 0o2766, caller: 1000, script: `: > "$F"`},
		"chown to no owner by the owner":                        {uid: 1000, gid: 1000, mode: 0o6755, caller: 1000, script: `chown : "$F"`},
		"chown to no owner by root":                             {uid: 1000, gid: 3000, mode: 0o6775, caller: 0, script: `chown : "$F"`},
		"chown to no owner of a directory":                      {uid: 1000, gid: 1000, mode: 0o6755, dir: true, caller: 1000, script: `chown : "$F"`},
		"chown to no owner by another of a plain file":          {uid: 2000, gid: 2000, mode: 0o666, caller: 1000, script: `chown : "$F"`},
	}
	for cache, opts := range map[string][]string{"no client cache": nil, "client cache": {"--client-cache"}} {
		in := dirs(t)
		plain := filepath.Join(filepath.Dir(in.backing), "plain")
		os.Mkdir(plain, 0o755)
		os.Chmod(filepath.Dir(in.backing), 0o755)
		os.Chmod(filepath.Dir(filepath.Dir(in.backing)), 0o755)
		for name, tc := range tests {
			for _, d := range []string{plain, in.backing} {
				p := filepath.Join(d, name)
				if tc.dir {
					os.Mkdir(p, 0o755)
				} else {
					os.WriteFile(p, []byte("data\n"), 0o644)
				}
				os.Chown(p, int(tc.uid), int(tc.gid))
				syscall.Chmod(p, tc.mode)
			}
		}
		up(t, in, 2, opts...)
		for name, tc := range tests {
			t.Run(cache+"/"+name, func(t *testing.T) {
				want, okPlain := asCaller(tc.caller, tc.caller, tc.groups, tc.script, filepath.Join(plain, name))
				got, ok := asCaller(tc.caller, tc.caller, tc.groups, tc.script, filepath.Join(in.mount, name))
				if ok != okPlain {
					t.Fatalf("through the mount: ok=%v %q; in a plain directory: ok=%v %q", ok, got, okPlain, want)
				}
				wantMode := modeOf(t, filepath.Join(plain, name))
				if m := modeOf(t, filepath.Join(in.mount, name)); m != wantMode {
					t.Errorf("mode through the mount %o, want %o as in a plain directory", m, wantMode)
				}
				if m := modeOf(t, filepath.Join(in.backing, name)); m != wantMode {
					t.Errorf("mode on the backing store %o, want %o as in a plain directory", m, wantMode)
				}
			})
		}
	}
}

func modeOf(t *testing.T, p string) uint32 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Mode & 0o7777
}

// TestExecutePermissionHoldsThroughTheMount runs programs through the
// mount as a user the backing store refuses execute permission, by mode
// or by ACL, and as one who may execute but not read: execve(2) needs
// execute permission only, which the mount's open must check as the
// caller, since the client's kernel checks no more than that some execute
// bit is set.
func TestExecutePermissionHoldsThroughTheMount(t *testing.T) {
	requireFUSE(t)
	prog, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skip("no /bin/true to run")
	}
	tests := map[string]struct {
		uid, gid  uint32
		mode      os.FileMode
		acl       string
		wantRuns  bool
		wantReads bool
	}{
		"others may only read":             {uid: 2000, gid: 3000, mode: 0o754, wantReads: true},
		"an ACL lets the caller only read": {uid: 0, gid: 0, mode: 0o755, acl: "u:1000:r", wantReads: true},
		"others may only execute":          {uid: 2000, gid: 2000, mode: 0o711, wantRuns: true},
	}
	for cache, opts := range map[string][]string{"no client cache": nil, "client cache": {"--client-cache"}} {
		in := dirs(t)
		for _, d := range []string{filepath.Dir(in.backing), filepath.Dir(filepath.Dir(in.backing))} {
			os.Chmod(d, 0o755)
		}
		for name, tc := range tests {
			p := filepath.Join(in.backing, name)
			os.WriteFile(p, prog, 0o755)
			os.Chown(p, int(tc.uid), int(tc.gid))
			os.Chmod(p, tc.mode)
			if tc.acl != "" {
				if out, err := exec.Command("setfacl", "-m", tc.acl, p).CombinedOutput(); err != nil {
					t.Logf("setfacl: %v %s", err, out)
					delete(tests, name)
				}
			}
		}
		up(t, in, 2, opts...)
		for name, tc := range tests {
			t.Run(cache+"/"+name, func(t *testing.T) {
				p := filepath.Join(in.mount, name)
				if out, ok := asUser(1000, 1000, p); ok != tc.wantRuns {
					t.Errorf("running %s as 1000: ok=%v %q, want %v", name, ok, out, tc.wantRuns)
				}
				if out, ok := asUser(1000, 1000, "cat", p); ok != tc.wantReads {
					t.Errorf("reading %s as 1000: ok=%v %.40q, want %v", name, ok, out, tc.wantReads)
				}
			})
		}
	}
}
