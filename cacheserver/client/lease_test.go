package client

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// leaseTable returns a lease table over generation words of its own, with
// the pins it releases collected in unpinned.
func leaseTable(slots int) (ls *leases, words []uint64, unpinned func() []uint64) {
	var mu sync.Mutex
	var got []uint64
	ls = &leases{es: 1 << 20}
	ls.unpins = &unpinner{send: func(holds []hold, _, _ int64) {
		mu.Lock()
		for _, h := range holds {
			got = append(got, h.id)
		}
		mu.Unlock()
	}}
	words = make([]uint64, slots+1)
	words[0] = 1
	ls.words = words
	return ls, words, func() []uint64 {
		mu.Lock()
		defer mu.Unlock()
		return slices.Sorted(slices.Values(got))
	}
}

func waitUnpinned(t *testing.T, unpinned func() []uint64, want []uint64) {
	t.Helper()
	for range 1000 {
		if slices.Equal(unpinned(), want) {
			return
		}
		sleepBriefly()
	}
	t.Fatalf("unpinned %v, want %v", unpinned(), want)
}

// TestLeaseReleasedOnlyWhenUnused proves that a lease that goes stale while
// a read uses it keeps its pin until that read ends: the slot must not be
// reused under a splice in flight.
func TestLeaseReleasedOnlyWhenUnused(t *testing.T) {
	ls, words, unpinned := leaseTable(4)
	defer ls.close()
	le := &lease{key: leaseKey{path: "f", idx: 0}, pin: hold{id: 7}, slot: 2, gen: 0, epoch: 1, lost: up}
	ls.put(le) // held by the read that took it
	if got := ls.get(le.key); got != le {
		t.Fatalf("get = %v, want the lease", got)
	}
	ls.release(le)
	words[2+1]++ // the slot changed
	if got := ls.get(le.key); got != nil {
		t.Fatal("a stale lease was handed out")
	}
	if len(unpinned()) != 0 {
		t.Fatalf("unpinned %v while a read holds the lease", unpinned())
	}
	ls.release(le)
	waitUnpinned(t, unpinned, []uint64{7})
}

// TestLeasesAreBounded proves that a client holds at most maxLeases pins on
// a server, and releases those it drops.
func TestLeasesAreBounded(t *testing.T) {
	ls, _, unpinned := leaseTable(4)
	defer ls.close()
	const n = maxLeases + 10
	for i := range uint64(n) {
		le := &lease{key: leaseKey{path: "f", idx: int64(i)}, pin: hold{id: i + 1}, slot: 1, epoch: 1, lost: up}
		ls.put(le)
		ls.release(le)
	}
	ls.mu.Lock()
	held := len(ls.m)
	ls.mu.Unlock()
	if held > maxLeases {
		t.Fatalf("%d leases held, want at most %d", held, maxLeases)
	}
	for len(unpinned()) != n-held {
		sleepBriefly()
	}
}

func up() bool { return false }

// TestLostConnectionVoidsLeases proves that a lease whose pin went with its
// connection is not read: the server may reuse the slot.
func TestLostConnectionVoidsLeases(t *testing.T) {
	ls, _, unpinned := leaseTable(4)
	defer ls.close()
	var lost bool
	le := &lease{key: leaseKey{path: "f", idx: 0}, pin: hold{id: 5}, slot: 0, epoch: 1, lost: func() bool { return lost }}
	ls.put(le)
	ls.release(le)
	if ls.get(le.key) != le {
		t.Fatal("a current lease was not handed out")
	}
	ls.release(le)
	lost = true
	if ls.get(le.key) != nil {
		t.Fatal("a lease of a lost connection was handed out")
	}
	waitUnpinned(t, unpinned, []uint64{5})
}

// TestEpochVoidsLeases proves that a server that restarted over the same
// cache directory voids the leases of its previous life.
func TestEpochVoidsLeases(t *testing.T) {
	ls, words, unpinned := leaseTable(4)
	defer ls.close()
	le := &lease{key: leaseKey{path: "f", idx: 0}, pin: hold{id: 3}, slot: 0, epoch: 1, lost: up}
	ls.put(le)
	ls.release(le)
	if ls.get(le.key) != le {
		t.Fatal("a current lease was not handed out")
	}
	ls.release(le)
	words[0]++
	if ls.get(le.key) != nil {
		t.Fatal("a lease of an earlier epoch was handed out")
	}
	waitUnpinned(t, unpinned, []uint64{3})
}

func sleepBriefly() { time.Sleep(time.Millisecond) }

// TestUnreadLeasesAreGivenBack proves that a lease nobody reads goes back
// to the server after a while: it pins a slot the server can neither evict
// nor reuse. One that is read stays.
func TestUnreadLeasesAreGivenBack(t *testing.T) {
	ls, _, unpinned := leaseTable(4)
	defer ls.close()
	idle := &lease{key: leaseKey{path: "idle", idx: 0}, pin: hold{id: 1}, slot: 0, epoch: 1, lost: up}
	busy := &lease{key: leaseKey{path: "busy", idx: 0}, pin: hold{id: 2}, slot: 1, epoch: 1, lost: up}
	for _, le := range []*lease{idle, busy} {
		ls.put(le)
		ls.release(le)
	}
	// The test sweeps by hand.
	ls.mu.Lock()
	close(ls.stop)
	ls.stop = nil
	ls.mu.Unlock()
	for range leaseIdleSweeps - 1 {
		if le := ls.get(busy.key); le != nil {
			ls.release(le)
		}
		ls.sweep(nil)
	}
	if len(unpinned()) != 0 {
		t.Fatalf("unpinned %v before the leases were idle long enough", unpinned())
	}
	if le := ls.get(busy.key); le != nil {
		ls.release(le)
	}
	ls.sweep(nil)
	waitUnpinned(t, unpinned, []uint64{1})
	if ls.get(busy.key) == nil {
		t.Fatal("a lease that is read was given back")
	}
}

// TestLeaseLostDuringAReadIsNotTrusted proves that bytes read from a lease
// count only if the lease still holds once they are read: a server that
// restarted while the client was held up between its check and its read
// may have put another extent in the slot.
func TestLeaseLostDuringAReadIsNotTrusted(t *testing.T) {
	ls, words, _ := leaseTable(4)
	defer ls.close()
	name := filepath.Join(t.TempDir(), "slab")
	if err := os.WriteFile(name, []byte("slab bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	file, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	le := &lease{key: leaseKey{path: "f", idx: 0}, pin: hold{id: 2}, file: file, valid: 10, slot: 0, epoch: 1, lost: up}
	ls.put(le)
	ls.release(le)
	dst := make([]byte, 4)
	if _, err := readLeased(ls, ls.get(le.key), 0, dst, false); err != nil || string(dst) != "slab" {
		t.Fatalf("a read from a current lease: %q, %v", dst, err)
	}
	held := ls.get(le.key)
	if held == nil {
		t.Fatal("a current lease was not handed out")
	}
	words[0]++ // the server restarts after the check
	if _, err := readLeased(ls, held, 0, dst, false); !errors.Is(err, errLeaseLost) {
		t.Fatalf("a read from a lease lost during it: %v, want errLeaseLost", err)
	}
}
