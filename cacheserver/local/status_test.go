package local

import (
	"errors"
	"strings"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/control"
)

// TestStatusShowsTheBackingStoresLatency checks the PFS-READ and PFS-WRITE
// columns: each server's mean time per extent, the instance's mean over
// all of them in the total row, and "-" where nothing was timed.
func TestStatusShowsTheBackingStoresLatency(t *testing.T) {
	st := &State{Mount: "/mnt/x", Backing: "/pfs", CacheDir: "/cache"}
	ss := []ServerStatus{
		{ServerState: ServerState{Index: 0, Data: "s0", PID: 10}, Alive: true,
			Stats: control.Stats{CopyUps: 4, CopyUpSeconds: 0.02, WriteBacks: 2, WriteBackSeconds: 0.1}},
		{ServerState: ServerState{Index: 1, Data: "s1", PID: 11}, Alive: true,
			Stats: control.Stats{CopyUps: 1, CopyUpSeconds: 0.03}},
		{ServerState: ServerState{Index: 2, Data: "s2", PID: 12}, Err: errors.New("unreachable")},
	}
	var b strings.Builder
	PrintStatus(&b, st, true, ss)
	want := map[string][2]string{
		"0":     {"5.00ms", "50.00ms"},
		"1":     {"30.00ms", "-"},
		"2":     {"-", "-"},
		"total": {"10.00ms", "50.00ms"},
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if head := strings.Fields(lines[1]); head[len(head)-2] != "PFS-READ" || head[len(head)-1] != "PFS-WRITE" {
		t.Fatalf("header %q does not end with PFS-READ, PFS-WRITE", lines[1])
	}
	for _, line := range lines[2:] {
		f := strings.Fields(line)
		w, ok := want[f[0]]
		if !ok {
			t.Fatalf("unexpected row %q", line)
		}
		if got := [2]string{f[len(f)-2], f[len(f)-1]}; got != w {
			t.Errorf("row %s: PFS-READ, PFS-WRITE = %v, want %v", f[0], got, w)
		}
		delete(want, f[0])
	}
	if len(want) > 0 {
		t.Errorf("rows missing: %v\n%s", want, b.String())
	}
}

// TestStatusNamesAFailedCacheDevice: a server whose cache device failed
// gets a line of its own under the table, saying why writes fail.
func TestStatusNamesAFailedCacheDevice(t *testing.T) {
	const deviceErr = "cache device failed: fdatasync of the slab: input/output error"
	st := &State{Mount: "/mnt/x", Backing: "/pfs", CacheDir: "/cache"}
	ss := []ServerStatus{
		{ServerState: ServerState{Index: 0, Data: "s0", PID: 10}, Alive: true},
		{ServerState: ServerState{Index: 1, Data: "s1", PID: 11}, Alive: true, Stats: control.Stats{CacheDeviceError: deviceErr}},
	}
	var b strings.Builder
	PrintStatus(&b, st, true, ss)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "server 1: "+deviceErr) || !strings.Contains(last, "writes fail") {
		t.Fatalf("last line %q does not name server 1 and its device's failure:\n%s", last, b.String())
	}
	if strings.Count(b.String(), "cache device failed") != 1 {
		t.Fatalf("the failure shows more than once, or for the wrong server:\n%s", b.String())
	}
}

func TestStatusNamesAServerThatCannotCommitItsIndex(t *testing.T) {
	const indexErr = "write /cache/s0/index.db: no space left on device"
	st := &State{Mount: "/mnt/x", Backing: "/pfs", CacheDir: "/cache"}
	ss := []ServerStatus{
		{ServerState: ServerState{Index: 0, Data: "s0", PID: 10}, Alive: true, Stats: control.Stats{IndexError: indexErr, IndexCommitFailures: 3}},
		{ServerState: ServerState{Index: 1, Data: "s1", PID: 11}, Alive: true},
	}
	var b strings.Builder
	PrintStatus(&b, st, true, ss)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "server 0: ") || !strings.Contains(last, indexErr) || !strings.Contains(last, "fsync fails") {
		t.Fatalf("last line %q does not name server 0 and why its index cannot be committed:\n%s", last, b.String())
	}
	if strings.Count(b.String(), "no space left") != 1 {
		t.Fatalf("the failure shows more than once, or for the wrong server:\n%s", b.String())
	}
}

func TestStatusNamesServersWhoseWriteBackFails(t *testing.T) {
	const full = "writing back extent 0 of a: write a: no space left on device"
	const down = "writing back extent 2 of b: write b: input/output error"
	st := &State{Mount: "/mnt/x", Backing: "/pfs", CacheDir: "/cache"}
	ss := []ServerStatus{
		{ServerState: ServerState{Index: 0, Data: "s0", PID: 10}, Alive: true, Stats: control.Stats{WriteBackFailing: true, WriteBackRefused: true, LastWriteBackError: full}},
		{ServerState: ServerState{Index: 1, Data: "s1", PID: 11}, Alive: true, Stats: control.Stats{WriteBackFailing: true, LastWriteBackError: down}},
		{ServerState: ServerState{Index: 2, Data: "s2", PID: 12}, Alive: true, Stats: control.Stats{WriteBackErrors: 1, LastWriteBackError: "an old failure"}},
	}
	var b strings.Builder
	PrintStatus(&b, st, true, ss)
	out := b.String()
	for _, want := range []string{"server 0: the backing directory refuses the write-back (" + full + "): writes that need cache space fail",
		"server 1: write-back keeps failing (" + down + ")"} {
		if !strings.Contains(out, want) {
			t.Errorf("status does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "an old failure") || strings.Contains(out, "server 2:") {
		t.Errorf("status names a server whose write-back works:\n%s", out)
	}
}

// TestStatusNamesAReadOnlyServer: a server whose write window is used up
// gets a line of its own under the table, saying why writes fail and until
// when.
func TestStatusNamesAReadOnlyServer(t *testing.T) {
	st := &State{Mount: "/mnt/x", Backing: "/pfs", CacheDir: "/cache"}
	ss := []ServerStatus{
		{ServerState: ServerState{Index: 0, Data: "s0", PID: 10}, Alive: true, Stats: control.Stats{WindowBytesWritten: 1 << 20, WindowLimitBytes: 3 << 20}},
		{ServerState: ServerState{Index: 1, Data: "s1", PID: 11}, Alive: true, Stats: control.Stats{WindowBytesWritten: 3 << 20, WindowLimitBytes: 3 << 20, ReadOnly: true}},
	}
	var b strings.Builder
	PrintStatus(&b, st, true, ss)
	out := b.String()
	if want := "server 1: read-only: 3 MiB written within the write window, which allows 3 MiB; writes fail with EROFS"; !strings.Contains(out, want) {
		t.Errorf("status does not say %q:\n%s", want, out)
	}
	if strings.Contains(out, "server 0:") {
		t.Errorf("status names a server that takes writes:\n%s", out)
	}
}
