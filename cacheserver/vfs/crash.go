package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"sync"
)

// ErrCrashed is returned by every operation of a Crashable after its crash.
var ErrCrashed = errors.New("file system crashed")

// Crashable is an FS that can crash, losing what was not made durable. It
// undoes lost writes on the underlying files when it crashes, so after Crash
// the files hold what a real disk could hold after a power loss, and a fresh
// FS can reopen them.
type Crashable struct {
	base FS

	// io is held shared by file reads and writes and exclusively by a
	// crash, so no I/O straddles one: a read that began before the crash
	// must not see the crash undo writes under it.
	io      sync.RWMutex
	mu      sync.Mutex
	crashed bool
	steps   int // durable steps seen so far
	crashAt int // crash when steps reaches this, if > 0
	rng     *rand.Rand
	files   []*crashFile
}

// NewCrashable wraps base. seed drives which unsynced writes a crash keeps.
func NewCrashable(base FS, seed uint64) *Crashable {
	return &Crashable{base: base, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// CrashAtStep makes the n-th durable step (counting from 1, including steps
// already seen) crash instead of running. n <= 0 disables it.
func (c *Crashable) CrashAtStep(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.crashAt = n
}

// Steps returns how many durable steps ran or were attempted.
func (c *Crashable) Steps() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.steps
}

// Crashed reports whether the FS has crashed.
func (c *Crashable) Crashed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.crashed
}

// Crash crashes the FS now: unsynced writes are lost, in any subset.
func (c *Crashable) Crash() {
	c.io.Lock()
	defer c.io.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.crashLocked()
}

func (c *Crashable) crashLocked() {
	if c.crashed {
		return
	}
	c.crashed = true
	for _, f := range c.files {
		f.undo(c.rng)
	}
}

// step counts a durable step and reports whether it may run.
func (c *Crashable) step() error {
	c.mu.Lock()
	if c.crashed {
		c.mu.Unlock()
		return ErrCrashed
	}
	c.steps++
	crash := c.crashAt > 0 && c.steps >= c.crashAt
	c.mu.Unlock()
	if crash {
		c.Crash()
		return ErrCrashed
	}
	return nil
}

func (c *Crashable) alive() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashed {
		return ErrCrashed
	}
	return nil
}

// OpenFile implements FS.
func (c *Crashable) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	if err := c.alive(); err != nil {
		return nil, err
	}
	f, err := c.base.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	cf := &crashFile{fs: c, f: f}
	c.mu.Lock()
	c.files = append(c.files, cf)
	c.mu.Unlock()
	return cf, nil
}

// MkdirAll implements FS.
func (c *Crashable) MkdirAll(name string, perm fs.FileMode) error {
	if err := c.alive(); err != nil {
		return err
	}
	return c.base.MkdirAll(name, perm)
}

// Durable implements FS: the step either runs whole or, at a crash, not at
// all, as an atomic commit of an embedded database does.
func (c *Crashable) Durable(step string, fn func() error) error {
	if err := c.step(); err != nil {
		return fmt.Errorf("%s: %w", step, err)
	}
	return c.base.Durable(step, fn)
}
