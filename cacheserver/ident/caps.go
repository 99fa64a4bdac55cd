package ident

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Caps is a set of Linux capabilities, bit n standing for capability n.
type Caps uint64

// FSCaps are the capabilities that decide file-system permission checks:
// the ones the kernel raises and drops with fsuid (CAP_FS_SET in
// include/linux/capability.h), and those that guard the trusted and security
// attributes. A Cred carries these of its caller; Do gives the thread that
// runs an operation exactly these of them, so the kernel of the backing file
// system grants what it would grant the caller itself.
const FSCaps = Caps(1<<unix.CAP_CHOWN | 1<<unix.CAP_DAC_OVERRIDE | 1<<unix.CAP_DAC_READ_SEARCH |
	1<<unix.CAP_FOWNER | 1<<unix.CAP_FSETID | 1<<unix.CAP_MKNOD | 1<<unix.CAP_LINUX_IMMUTABLE |
	1<<unix.CAP_SYS_ADMIN | 1<<unix.CAP_SETFCAP | 1<<unix.CAP_MAC_OVERRIDE)

// Has reports whether c holds capability n.
func (c Caps) Has(n int) bool { return c&(1<<uint(n)) != 0 }

// EffectiveCaps returns the capabilities among FSCaps that c holds: Caps
// when the caller's capabilities are known (HasCaps), otherwise what its
// uid gives under the kernel's rules for a process that never changed its
// capabilities, all of them for root and none for anyone else.
func (c Cred) EffectiveCaps() Caps {
	switch {
	case c.HasCaps:
		return c.Caps & FSCaps
	case c.UID == 0:
		return FSCaps
	default:
		return 0
	}
}

// Capable reports whether c holds capability n, as capable(9) asks.
func (c Cred) Capable(n int) bool { return c.EffectiveCaps().Has(n) }

// threadCaps returns the effective, permitted and inheritable capabilities
// of the calling thread.
func threadCaps() ([2]unix.CapUserData, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return data, fmt.Errorf("capget: %w", err)
	}
	return data, nil
}

func effective(data [2]unix.CapUserData) Caps {
	return Caps(data[0].Effective) | Caps(data[1].Effective)<<32
}

// setEffective sets the effective capabilities of the calling thread to
// eff, keeping its permitted and inheritable ones. The kernel refuses an
// effective set that is not part of the permitted one.
func setEffective(data [2]unix.CapUserData, eff Caps) error {
	data[0].Effective, data[1].Effective = uint32(eff), uint32(eff>>32)
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}
