package server

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/engine"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// maxPipes bounds the write pipes a server keeps for the clients on its
// machine. Past it, pipes whose client closed its end are dropped first.
const maxPipes = 256

// pipeTable holds the read ends of the pipes clients on this machine write
// through (OpWritePipe): a client puts the bytes of a write into its pipe,
// and the server moves them into the slab. A client never holds a
// descriptor it could write the slab with, so a client stalled across a
// restart of the server cannot write into a slot the new server reused:
// its pipe went with the old server.
type pipeTable struct {
	mu sync.Mutex
	// pipes are the read ends, by id, in non-blocking mode: a client that
	// put fewer bytes than it said makes its write fail, not wait.
	pipes map[uint64]int
	busy  map[uint64]bool
	slab  *os.File
}

// open makes a pipe that holds size bytes and returns its id and write
// end.
func (pt *pipeTable) open(size int) (uint64, *os.File, error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return 0, nil, err
	}
	r, w := fds[0], os.NewFile(uintptr(fds[1]), "pipe")
	got, err := unix.FcntlInt(uintptr(r), unix.F_SETPIPE_SZ, size)
	if err == nil && got < size {
		err = fmt.Errorf("got %d bytes", got)
	}
	if err == nil {
		err = unix.SetNonblock(r, true)
	}
	if err != nil {
		_, _ = unix.Close(r), w.Close()
		return 0, nil, fmt.Errorf("a pipe of %d bytes: %w", size, errors.Join(err, syscall.EOPNOTSUPP))
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := binary.LittleEndian.Uint64(b[:])
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.pipes == nil {
		pt.pipes, pt.busy = map[uint64]int{}, map[uint64]bool{}
	}
	if len(pt.pipes) >= maxPipes {
		pt.reapLocked()
	}
	if len(pt.pipes) >= maxPipes {
		_, _ = unix.Close(r), w.Close()
		return 0, nil, fmt.Errorf("%d write pipes open: %w", len(pt.pipes), syscall.EAGAIN)
	}
	pt.pipes[id] = r
	return id, w, nil
}

// reapLocked drops the idle pipes whose write end was closed.
func (pt *pipeTable) reapLocked() {
	for id, r := range pt.pipes {
		if pt.busy[id] {
			continue
		}
		fds := []unix.PollFd{{Fd: int32(r)}}
		if n, err := unix.Poll(fds, 0); err == nil && n > 0 && fds[0].Revents&unix.POLLHUP != 0 {
			_ = unix.Close(r)
			delete(pt.pipes, id)
		}
	}
}

// take gives the read end of pipe id to one write at a time.
func (pt *pipeTable) take(id uint64) (int, error) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	r, ok := pt.pipes[id]
	if !ok || pt.busy[id] {
		return -1, fmt.Errorf("no idle write pipe %x: %w", id, syscall.EBADF)
	}
	pt.busy[id] = true
	return r, nil
}

// put ends a write through pipe id; after a failed one the pipe may hold
// bytes of it, so it is closed, and the client's next write through it
// fails.
func (pt *pipeTable) put(id uint64, ok bool) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	delete(pt.busy, id)
	if r, open := pt.pipes[id]; open && !ok {
		_ = unix.Close(r)
		delete(pt.pipes, id)
	}
}

// slabFile returns the server's own read-write descriptor of the slab.
func (pt *pipeTable) slabFile(sr SpanReader) (*os.File, error) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.slab == nil {
		f, err := os.OpenFile(sr.SlabFile(), os.O_RDWR, 0)
		if err != nil {
			return nil, err
		}
		pt.slab = f
	}
	return pt.slab, nil
}

func (pt *pipeTable) close() {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	for id, r := range pt.pipes {
		_ = unix.Close(r)
		delete(pt.pipes, id)
	}
	if pt.slab != nil {
		_ = pt.slab.Close()
		pt.slab = nil
	}
}

// writePipe hands a client on this machine a pipe to write through.
func (s *Server) writePipe(ctx context.Context, req *wire.Request, resp *wire.Response) error {
	if _, _, err := s.local(ctx, req); err != nil {
		return err
	}
	id, w, err := s.pipes.open(int(s.cfg.Info.ExtentSize))
	if err != nil {
		return err
	}
	resp.Meta.Uint64(id)
	resp.File = w
	return nil
}

// writePiped writes the bytes a client put into its pipe: into a slot the
// engine prepares when the write needs no read, and otherwise through
// WriteAt. Either way the pipe is left empty, or closed.
func (s *Server) writePiped(ctx context.Context, req *wire.Request, resp *wire.Response) error {
	sr, _, err := s.local(ctx, req)
	if err != nil {
		return err
	}
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	off, n, id := req.Args.Int64(), int(req.Args.Uint32()), req.Args.Uint64()
	ctx, err = acceptedWrite(ctx, req.Args)
	if err != nil {
		return err
	}
	r, err := s.pipes.take(id)
	if err != nil {
		return err
	}
	err = s.writeFromPipe(ctx, sr, r, p, off, n)
	s.pipes.put(id, err == nil)
	if err != nil {
		return err
	}
	resp.Meta.Uint32(uint32(n)).Uint64(s.incarnation)
	return nil
}

func (s *Server) writeFromPipe(ctx context.Context, sr SpanReader, r int, p string, off int64, n int) error {
	if s.draining.Load() {
		return errDraining
	}
	slab, err := s.pipes.slabFile(sr)
	if err != nil {
		return err
	}
	tx, err := sr.BeginWrite(ctx, p, off, n)
	if errors.Is(err, engine.ErrNoSpans) {
		buf := make([]byte, n)
		if err := readAll(r, buf); err != nil {
			return err
		}
		_, err = s.cfg.Cache.WriteAt(ctx, p, buf, off)
		return err
	}
	if err != nil {
		return err
	}
	err = spliceAll(r, slab, tx.Off, n)
	tx.Commit(err == nil)
	return err
}

// readAll reads len(buf) bytes from pipe r, which must hold them.
func readAll(r int, buf []byte) error {
	for got := 0; got < len(buf); {
		m, err := unix.Read(r, buf[got:])
		if err != nil {
			return fmt.Errorf("reading the write pipe: %w", err)
		}
		if m == 0 {
			return fmt.Errorf("the write pipe holds fewer bytes than the write: %w", syscall.EINVAL)
		}
		got += m
	}
	return nil
}

// spliceAll moves n bytes from pipe r into f at off.
func spliceAll(r int, f *os.File, off int64, n int) error {
	for n > 0 {
		m, err := unix.Splice(r, nil, int(f.Fd()), &off, n, unix.SPLICE_F_NONBLOCK)
		if err != nil {
			return fmt.Errorf("moving a write into the slab: %w", err)
		}
		if m == 0 {
			return fmt.Errorf("the write pipe holds fewer bytes than the write: %w", syscall.EINVAL)
		}
		n -= int(m)
	}
	return nil
}
