package ident

import (
	"slices"
	"syscall"

	"golang.org/x/sys/unix"
)

// KilledByWrite returns the setuid and setgid bits that the kernel clears
// from a file with the given mode (a stat(2) mode, file type included) and
// group when c writes to it or truncates it (setattr_should_drop_suidgid in
// fs/attr.c). A holder of CAP_FSETID (root, unless it dropped it) keeps
// both; anyone else loses setuid, and setgid when the file is
// group-executable or c is not a member of the file's group. Only regular
// files lose them.
func (c Cred) KilledByWrite(mode, gid uint32) uint32 {
	if c.Capable(unix.CAP_FSETID) || mode&syscall.S_IFMT != syscall.S_IFREG {
		return 0
	}
	kill := mode & syscall.S_ISUID
	if mode&syscall.S_ISGID != 0 && (mode&syscall.S_IXGRP != 0 || !c.InGroup(gid)) {
		kill |= syscall.S_ISGID
	}
	return kill
}

// InGroup reports whether c is a member of group gid, as its primary group
// or one of its supplementary groups (in_group_p in kernel/groups.c).
func (c Cred) InGroup(gid uint32) bool {
	return c.GID == gid || slices.Contains(c.Groups, gid)
}
