package control

import (
	"errors"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/burstcache/burstcache/test/smalldisk"
)

// fullDisk mounts a small tmpfs on a new directory and returns it, with a
// function that fills it until the file system refuses to give a byte
// more, as the cache disk of a server is when others filled it.
func fullDisk(t *testing.T) (dir string, fill func()) {
	t.Helper()
	dir = smalldisk.Mount(t, "1m")
	return dir, func() { smalldisk.Fill(t, filepath.Join(dir, "other-files")) }
}

// TestServedCallsNeedNoRoomOnAFullDisk fills the disk of the file of calls
// served once the server runs: the calls that change something, a
// teardown's drain and discard among them, must still be recorded and
// served, and refused when sent again after a restart on the full disk.
// The log used to append a line per call, and to write itself anew when it
// was opened: on a full cache disk every such call was refused (503, EIO)
// until others made room, and the teardown of the instance stalled.
func TestServedCallsNeedNoRoomOnAFullDisk(t *testing.T) {
	dir, fill := fullDisk(t)
	r := newServedRigIn(t, dir)
	fill()
	secret := []byte(servedSecret)
	var seen []string
	for _, uri := range []string{"/v1/flush", "/v1/drain", "/v1/hidden/remove", "/v1/discard"} {
		auth := sign(secret, http.MethodPost, uri, nil, time.Now())
		if code := r.send(http.MethodPost, uri, auth); code != http.StatusOK {
			t.Fatalf("POST %s on a full disk: HTTP %d, want 200", uri, code)
		}
		seen = append(seen, uri, auth)
	}
	r.restart()
	for i := 0; i < len(seen); i += 2 {
		if code := r.send(http.MethodPost, seen[i], seen[i+1]); code != http.StatusUnauthorized {
			t.Errorf("POST %s sent again after a restart on a full disk: HTTP %d, want 401", seen[i], code)
		}
	}
	if code := r.send(http.MethodPost, "/v1/drain", sign(secret, http.MethodPost, "/v1/drain", nil, time.Now())); code != http.StatusOK {
		t.Errorf("a fresh drain after a restart on a full disk: HTTP %d, want 200", code)
	}
}

// TestServedLogOnAFullDiskRefusesWhatItCannotHold records, on a full
// disk, more calls than the file has slots for: the file cannot grow, so
// the call past them must be refused with the reason (errServedFull, and
// ENOSPC), and every call it holds must still be there after a restart.
func TestServedLogOnAFullDiskRefusesWhatItCannotHold(t *testing.T) {
	dir, fill := fullDisk(t)
	file := filepath.Join(dir, "served-calls.log")
	now := time.Now()
	// With its header, a file of 63 slots fills a page of the tmpfs
	// whole: growing needs another.
	l, err := openServedLogSized(file, now, 63, servedMaxSlots)
	if err != nil {
		t.Fatal(err)
	}
	fill()
	var ids []callID
	for range 63 {
		ids = append(ids, newCallID(now))
		if err := l.record(ids[len(ids)-1], now); err != nil {
			t.Fatalf("recording call %d of 63 on a full disk: %v", len(ids), err)
		}
	}
	err = l.record(newCallID(now), now)
	if !errors.Is(err, errServedFull) || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("recording a 64th call in 63 slots on a full disk: %v, want errServedFull and ENOSPC", err)
	}
	if err := l.close(); err != nil {
		t.Fatal(err)
	}
	after, err := openServedLog(file, now)
	if err != nil {
		t.Fatalf("opening the log on a full disk: %v", err)
	}
	defer after.close()
	if got := after.served(); len(got) != len(ids) {
		t.Errorf("the log holds %d calls after a restart, want the %d recorded", len(got), len(ids))
	}
}
