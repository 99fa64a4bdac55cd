package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// maxWritePipes bounds the pipes a client writes through per server, and
// so its writes through pipes at once; more go through the socket. Pipes
// of a whole extent count against the server user's pipe pages
// (fs.pipe-user-pages-soft: 64 MiB by default for a user without
// CAP_SYS_RESOURCE), which every mount of the node shares.
const maxWritePipes = 4

// pipeRetry is how long a client writes through the socket after a server
// could not make it a pipe, before it asks again.
const pipeRetry = time.Second

// writePipes are the pipes of one local server that a client writes
// through (wire.OpWritePipe).
type writePipes struct {
	mu      sync.Mutex
	off     bool      // the server offers none
	retryAt time.Time // the server could make none; ask again after this
	idle    []*writePipe
	open    int
}

// writePipe is the write end of a server's pipe, and the pipe's id.
type writePipe struct {
	id uint64
	w  *os.File
	fd int
}

// get returns an idle pipe, fetching one from the server while fewer than
// maxWritePipes are open; nil when there is none to have.
func (ps *writePipes) get(ctx context.Context, l *localSlab) *writePipe {
	ps.mu.Lock()
	if n := len(ps.idle); n > 0 {
		p := ps.idle[n-1]
		ps.idle = ps.idle[:n-1]
		ps.mu.Unlock()
		return p
	}
	if ps.off || ps.open >= maxWritePipes || time.Now().Before(ps.retryAt) {
		ps.mu.Unlock()
		return nil
	}
	ps.open++
	ps.mu.Unlock()
	p, err := fetchPipe(ctx, l)
	if err != nil {
		ps.mu.Lock()
		ps.open--
		if errors.Is(err, syscall.ENOSYS) || errors.Is(err, wire.ErrNotLocal) {
			ps.off = true
		}
		ps.retryAt = time.Now().Add(pipeRetry)
		ps.mu.Unlock()
		return nil
	}
	return p
}

func fetchPipe(ctx context.Context, l *localSlab) (*writePipe, error) {
	w, meta, err := wire.FetchFile(ctx, l.addr, l.creds, ident.Process(), wire.OpWritePipe, nil)
	if err != nil {
		return nil, err
	}
	d := wire.NewDecoder(meta)
	id := d.Uint64()
	if err := d.Err(); err != nil {
		_ = w.Close()
		return nil, err
	}
	return &writePipe{id: id, w: w, fd: int(w.Fd())}, nil
}

// put makes p idle again.
func (ps *writePipes) put(p *writePipe) {
	ps.mu.Lock()
	ps.idle = append(ps.idle, p)
	ps.mu.Unlock()
}

// procFD names a descriptor of this process in /proc, for a second end of
// a pipe.
var procFD = "/proc/self/fd/%d"

// empty makes sure the server can no longer read the bytes fill put into
// p, which refer to the pages of the write's buffer: a server still holding
// the pipe would otherwise read whatever the buffer holds next. A call
// whose connection broke does not end the server's handler of it, which
// may read the pipe long after the call failed (when it was waiting for
// space, say). The client reads back what the server has not taken, from a
// read end of its own (opened through /proc, as for a FIFO); a server
// reading the pipe after that finds it empty and fails the write. Where it
// cannot, it waits until the pipe is empty or has no reader left.
func (p *writePipe) empty() {
	if r, err := unix.Open(fmt.Sprintf(procFD, p.fd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
		drained := drain(r)
		_ = unix.Close(r)
		if drained {
			return
		}
	}
	fds := []unix.PollFd{{Fd: int32(p.fd)}}
	for {
		// TIOCINQ is FIONREAD: the bytes in the pipe.
		if n, err := unix.IoctlGetInt(p.fd, unix.TIOCINQ); err == nil && n == 0 {
			return
		}
		// A pipe without readers polls POLLERR at its write end.
		if _, err := unix.Poll(fds, 10); err == nil && fds[0].Revents&unix.POLLERR != 0 {
			return
		}
	}
}

// drain reads non-blocking read end r of a pipe until it is empty, and
// reports whether it got there.
func drain(r int) bool {
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(r, buf)
		switch {
		case n > 0 || errors.Is(err, syscall.EINTR):
		case n == 0 || errors.Is(err, syscall.EAGAIN):
			return true
		default:
			return false
		}
	}
}

// drop closes p, which held bytes of a write that failed.
func (ps *writePipes) drop(p *writePipe) {
	_ = p.w.Close()
	ps.mu.Lock()
	ps.open--
	ps.mu.Unlock()
}

// disable makes writes go through the socket from now on.
func (ps *writePipes) disable() {
	ps.mu.Lock()
	ps.off = true
	ps.mu.Unlock()
}

func (ps *writePipes) close() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.idle {
		_ = p.w.Close()
	}
	ps.idle, ps.off = nil, true
}

// fill puts data into the pipe without copying it: the pipe refers to the
// pages of data, which must not change until the server has moved them.
// It never waits: the pipe is empty and holds a whole extent, and a pipe
// whose server went away fails with EPIPE.
func (p *writePipe) fill(data []byte) error {
	for len(data) > 0 {
		iov := []unix.Iovec{{Base: &data[0]}}
		iov[0].SetLen(len(data))
		n, err := unix.Vmsplice(p.fd, iov, unix.SPLICE_F_NONBLOCK)
		if err != nil {
			return fmt.Errorf("putting a write into the server's pipe: %w", err)
		}
		data = data[n:]
	}
	return nil
}
