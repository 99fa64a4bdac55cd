package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestLimits(t *testing.T) {
	tests := map[string]struct {
		tun     Tunables
		op      func(r *rig) error
		wantErr error
	}{
		"write past MaxFileSize": {
			tun:     Tunables{MaxFileSize: 10000},
			op:      func(r *rig) error { return writeErr(r, "f", 9999, 2) },
			wantErr: ErrFileTooLarge,
		},
		"write up to MaxFileSize": {
			tun: Tunables{MaxFileSize: 10000},
			op:  func(r *rig) error { return writeErr(r, "f", 9999, 1) },
		},
		"truncate past MaxFileSize": {
			tun:     Tunables{MaxFileSize: 10000},
			op:      func(r *rig) error { return r.e.Truncate(context.Background(), "f", 10001) },
			wantErr: ErrFileTooLarge,
		},
		"truncate of a file past MaxFileSize to a size past it": {
			tun: Tunables{MaxFileSize: 10000},
			op: func(r *rig) error {
				return errors.Join(r.onBacking("f", 20000), r.e.Truncate(context.Background(), "f", 15000))
			},
		},
		"truncate of a file past MaxFileSize to a size below it": {
			tun: Tunables{MaxFileSize: 10000},
			op: func(r *rig) error {
				return errors.Join(r.onBacking("f", 20000), r.e.Truncate(context.Background(), "f", 5000))
			},
		},
		"truncate of a file past MaxFileSize that grows it": {
			tun: Tunables{MaxFileSize: 10000},
			op: func(r *rig) error {
				return errors.Join(r.onBacking("f", 20000), r.e.Truncate(context.Background(), "f", 20001))
			},
			wantErr: ErrFileTooLarge,
		},
		"shrink past MaxFileSize": {
			tun: Tunables{MaxFileSize: 10000},
			op:  func(r *rig) error { return r.e.AdmitSize("f", 20000, 15000) },
		},
		"growth past MaxFileSize of a file past it": {
			tun:     Tunables{MaxFileSize: 10000},
			op:      func(r *rig) error { return r.e.AdmitSize("f", 20000, 20001) },
			wantErr: ErrFileTooLarge,
		},
		"extend past MaxFileSize": {
			tun:     Tunables{MaxFileSize: 10000},
			op:      func(r *rig) error { return r.e.ExtendSize(context.Background(), "f", 10001) },
			wantErr: ErrFileTooLarge,
		},
		"size past MaxFileSize": {
			tun:     Tunables{MaxFileSize: 10000},
			op:      func(r *rig) error { return r.e.AdmitSize("f", 0, 10001) },
			wantErr: ErrFileTooLarge,
		},
		"size up to MaxFileSize": {
			tun: Tunables{MaxFileSize: 10000},
			op:  func(r *rig) error { return r.e.AdmitSize("f", 0, 10000) },
		},
		"create after writes to MaxFiles files": {
			tun: Tunables{MaxFiles: 2},
			op: func(r *rig) error {
				if err := errors.Join(writeErr(r, "a", 0, 1), writeErr(r, "b", 0, 1), writeErr(r, "a", 5, 1)); err != nil {
					return err
				}
				_, err := r.e.ReserveFile("c")
				return err
			},
			wantErr: ErrTooManyFiles,
		},
		// A file renamed while open, or unlinked while open (a mount
		// renames it to a hidden name), is written through a name that no
		// create or open reserved: its writes land, past the limit, as
		// write(2) does on a file open for writing, and the file counts.
		"writes through a name not reserved, past MaxFiles": {
			tun: Tunables{MaxFiles: 1},
			op: func(r *rig) error {
				if err := errors.Join(writeErr(r, "a", 0, 1), writeErr(r, "renamed", 0, 1),
					r.e.ExtendSize(context.Background(), "hidden", 10)); err != nil {
					// Not wrapped: the case wants ErrTooManyFiles of the create only.
					return errors.New("a write past the limit failed: " + err.Error())
				}
				if err := r.e.Unlink(context.Background(), "a"); err != nil {
					return err
				}
				_, err := r.e.ReserveFile("b")
				return err
			},
			wantErr: ErrTooManyFiles,
		},
		"reservation beyond MaxFiles": {
			tun: Tunables{MaxFiles: 1},
			op: func(r *rig) error {
				_, err := r.e.ReserveFile("a")
				_, err2 := r.e.ReserveFile("b")
				return errors.Join(err, err2)
			},
			wantErr: ErrTooManyFiles,
		},
		"reservation given back": {
			tun: Tunables{MaxFiles: 1},
			op: func(r *rig) error {
				_, err := r.e.ReserveFile("a")
				err2 := r.e.EndReserve(context.Background(), "a", false)
				_, err3 := r.e.ReserveFile("b")
				return errors.Join(err, err2, err3, r.e.EndReserve(context.Background(), "b", true), writeErr(r, "b", 0, 1))
			},
		},
		"reservation kept": {
			tun: Tunables{MaxFiles: 1},
			op: func(r *rig) error {
				_, err := r.e.ReserveFile("a")
				if err := errors.Join(err, r.e.EndReserve(context.Background(), "a", true)); err != nil {
					return err
				}
				_, err = r.e.ReserveFile("b")
				return err
			},
			wantErr: ErrTooManyFiles,
		},
		"invalidate of a file removed behind the cache's back makes room": {
			tun: Tunables{MaxFiles: 1},
			op: func(r *rig) error {
				if err := errors.Join(reserveKept(r, "d/a"), os.Remove(filepath.Join(r.root, "d/a"))); err != nil {
					return err
				}
				if err := r.e.InvalidatePath(context.Background(), "d"); err != nil {
					return err
				}
				_, err := r.e.ReserveFile("b")
				return err
			},
		},
		"invalidate of a file the backing store holds": {
			tun: Tunables{MaxFiles: 1},
			op: func(r *rig) error {
				if err := errors.Join(reserveKept(r, "d/a"), r.e.InvalidatePath(context.Background(), "d")); err != nil {
					return err
				}
				_, err := r.e.ReserveFile("b")
				return err
			},
			wantErr: ErrTooManyFiles,
		},
		"drop before a rename keeps the place": {
			tun: Tunables{MaxFiles: 1},
			op: func(r *rig) error {
				if err := errors.Join(writeErr(r, "a", 0, 1), r.e.FlushAndDropKeepingCounts(context.Background(), "a")); err != nil {
					return err
				}
				_, err := r.e.ReserveFile("b")
				return err
			},
			wantErr: ErrTooManyFiles,
		},
		"drop after a rename gives the place back": {
			tun: Tunables{MaxFiles: 1},
			op: func(r *rig) error {
				ctx := context.Background()
				if err := errors.Join(writeErr(r, "a", 0, 1), r.e.FlushAndDropKeepingCounts(ctx, "a"), r.e.FlushAndDrop(ctx, "a")); err != nil {
					return err
				}
				_, err := r.e.ReserveFile("b")
				return err
			},
		},
		"unlink makes room under MaxFiles": {
			tun: Tunables{MaxFiles: 1},
			op: func(r *rig) error {
				return errors.Join(writeErr(r, "a", 0, 1), r.e.Unlink(context.Background(), "a"), writeErr(r, "b", 0, 1))
			},
		},
		"write window exceeded": {
			tun:     Tunables{WriteWindow: WriteWindow{Multiplier: 2, Length: time.Hour}},
			op:      func(r *rig) error { return writeErr(r, "f", 0, 2*8*4096+1) },
			wantErr: ErrReadOnly,
		},
		"write completing another past the window": {
			tun: Tunables{WriteWindow: WriteWindow{Multiplier: 2, Length: time.Hour}, MaxFiles: 1},
			op: func(r *rig) error {
				if err := writeErr(r, "f", 0, 2*8*4096); err != nil {
					return err
				}
				_, err := r.e.WriteAt(Completing(context.Background()), "g", []byte("x"), 0)
				return err
			},
		},
		"open for writing with the window used up": {
			tun: Tunables{WriteWindow: WriteWindow{Multiplier: 2, Length: time.Hour}},
			op: func(r *rig) error {
				return errors.Join(writeErr(r, "f", 0, 2*8*4096), r.e.AdmitWriter("f", false))
			},
			wantErr: ErrReadOnly,
		},
		"open for writing with room in the window": {
			tun: Tunables{WriteWindow: WriteWindow{Multiplier: 2, Length: time.Hour}},
			op: func(r *rig) error {
				return errors.Join(writeErr(r, "f", 0, 2*8*4096-1), r.e.AdmitWriter("g", false))
			},
		},
		"create beyond MaxFiles": {
			tun: Tunables{MaxFiles: 1},
			op: func(r *rig) error {
				if err := writeErr(r, "a", 0, 1); err != nil {
					return err
				}
				_, err := r.e.ReserveFile("b")
				return err
			},
			wantErr: ErrTooManyFiles,
		},
		"open at MaxFiles": {
			tun: Tunables{MaxFiles: 1},
			op: func(r *rig) error {
				if err := writeErr(r, "a", 0, 1); err != nil {
					return err
				}
				reserved, err := r.e.ReserveFile("a")
				if reserved {
					err = errors.New("reserved a file the cache holds")
				}
				return err
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, 4096, 8, func(c *Config) { c.Tunables = tc.tun })
			err := tc.op(r)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

// reserveKept creates p on the backing store as a create through the
// cache does: a place reserved, the backing file made, the record kept.
func reserveKept(r *rig, p string) error {
	if _, err := r.e.ReserveFile(p); err != nil {
		return err
	}
	err := os.MkdirAll(filepath.Dir(filepath.Join(r.root, p)), 0o755)
	if err == nil {
		err = r.onBacking(p, 0)
	}
	return errors.Join(err, r.e.EndReserve(context.Background(), p, err == nil))
}

// TestMaxFilesShare checks that an engine of several counts only the files
// its Share counts, against its part of MaxFiles, across a restart too,
// and that the parts of MaxFiles add up to it.
func TestMaxFilesShare(t *testing.T) {
	counts := func(p string) bool { return p[0] == 'm' }
	r := newRig(t, 4096, 8, func(c *Config) {
		c.Tunables = Tunables{MaxFiles: 5}
		c.Share = Share{Index: 2, Servers: 3, Counts: counts}
	})
	// Part 1 of 5 over 3: mine takes it, others' files are not counted.
	if err := errors.Join(writeErr(r, "mine", 0, 1), writeErr(r, "other1", 0, 1), writeErr(r, "other2", 0, 1)); err != nil {
		t.Fatal(err)
	}
	r.restart()
	if _, err := r.e.ReserveFile("more"); !errors.Is(err, ErrTooManyFiles) {
		t.Errorf("second file of a part of 1 after a restart: %v, want ErrTooManyFiles", err)
	}
	if err := writeErr(r, "other3", 0, 1); err != nil {
		t.Errorf("file another engine counts: %v", err)
	}
	for _, tc := range []struct{ maxFiles, servers, want int64 }{{5, 3, 5}, {2, 3, 2}, {7, 1, 7}, {9, 4, 9}} {
		var sum int64
		for i := range tc.servers {
			sum += Share{Index: int(i), Servers: int(tc.servers)}.Of(tc.maxFiles)
		}
		if sum != tc.want {
			t.Errorf("parts of %d over %d servers add up to %d, want %d", tc.maxFiles, tc.servers, sum, tc.want)
		}
	}
}

// onBacking writes a file of size bytes straight to the backing directory,
// as a job that bypassed the cache would.
func (r *rig) onBacking(p string, size int) error {
	return os.WriteFile(filepath.Join(r.root, p), make([]byte, size), 0o644)
}

// writeErr writes n bytes in 4 KiB calls and returns the first error.
func writeErr(r *rig, p string, off int64, n int) error {
	for n > 0 {
		c := min(n, 4096)
		if _, err := r.e.WriteAt(context.Background(), p, make([]byte, c), off); err != nil {
			return err
		}
		off, n = off+int64(c), n-c
	}
	return nil
}

// TestWriteWindowSlides fills the window, checks the read-only state in
// Stats, and moves the clock past the window to make the cache writable.
func TestWriteWindowSlides(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1_000_000, 0)}
	r := newRig(t, 4096, 8, func(c *Config) {
		c.Clock = clk
		c.Tunables = Tunables{WriteWindow: WriteWindow{Multiplier: 1, Length: time.Hour}}
	})
	r.writeBacking("in", make([]byte, 3*4096))
	if _, err := r.e.ReadAt(context.Background(), "in", make([]byte, 3*4096), 0); err != nil {
		t.Fatal(err)
	}
	if got := r.e.Stats().WindowBytes; got != 3*4096 {
		t.Fatalf("copy-ups counted %d bytes in the window, want %d", got, 3*4096)
	}
	if err := writeErr(r, "f", 0, 5*4096); err != nil {
		t.Fatal(err)
	}
	if err := writeErr(r, "f", 0, 1); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("write with a full window: %v", err)
	}
	if s := r.e.Stats(); !s.ReadOnly || s.WindowLimit != 8*4096 {
		t.Fatalf("stats: %+v", s)
	}
	clk.advance(61 * time.Minute)
	if err := writeErr(r, "f", 0, 1); err != nil {
		t.Fatalf("write after the window slid: %v", err)
	}
	if r.e.Stats().ReadOnly {
		t.Fatal("still read-only")
	}
}

func TestTruncateCacheOnlyFileGrowsBacking(t *testing.T) {
	r := newRig(t, 4096, 8, nil)
	r.write("f", 0, []byte("0123456789"))
	if err := r.e.Truncate(context.Background(), "f", 5000); err != nil {
		t.Fatal(err)
	}
	if err := r.e.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(r.root, "f"))
	if err != nil || fi.Size() != 5000 {
		t.Fatalf("backing size %v, %v; want 5000", fi, err)
	}
}

// TestAcceptedWritesPassTheCacheLimits checks that writes marked Accepted,
// whose bytes a job was told were written, pass a full write window and
// MaxFiles, and count in the window, while MaxFileSize still holds and
// other writes are still refused.
func TestAcceptedWritesPassTheCacheLimits(t *testing.T) {
	r := newRig(t, 4096, 8, func(c *Config) {
		c.Tunables = Tunables{MaxFiles: 1, MaxFileSize: 64 << 10, WriteWindow: WriteWindow{Multiplier: 1, Length: time.Hour}}
	})
	ctx := context.Background()
	if err := writeErr(r, "a", 0, 8*4096); err != nil {
		t.Fatal(err)
	}
	if err := writeErr(r, "a", 0, 1); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("write with a full window: %v, want %v", err, ErrReadOnly)
	}
	before := r.e.Stats().WindowBytes
	if _, err := r.e.WriteAt(Accepted(ctx), "a", []byte("kept"), 100); err != nil {
		t.Fatalf("accepted write with a full window: %v", err)
	}
	if _, err := r.e.WriteAt(Accepted(ctx), "b", []byte("also kept"), 0); err != nil {
		t.Fatalf("accepted write of a file past MaxFiles: %v", err)
	}
	if got := r.e.Stats().WindowBytes; got <= before {
		t.Fatalf("accepted writes left the window at %d bytes, was %d", got, before)
	}
	if _, err := r.e.WriteAt(Accepted(ctx), "a", []byte("x"), 64<<10); !errors.Is(err, ErrFileTooLarge) {
		t.Fatalf("accepted write past MaxFileSize: %v, want %v", err, ErrFileTooLarge)
	}
	if err := r.e.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]struct {
		off  int64
		data string
	}{"a": {100, "kept"}, "b": {0, "also kept"}} {
		b, err := os.ReadFile(filepath.Join(r.root, p))
		if err != nil || int64(len(b)) < want.off+int64(len(want.data)) || string(b[want.off:want.off+int64(len(want.data))]) != want.data {
			t.Fatalf("backing %s after flush: %v; want %q at %d", p, err, want.data, want.off)
		}
	}
}
