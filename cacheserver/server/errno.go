package server

import (
	"context"
	"errors"
	"io/fs"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/wire"
)

var errNoSys = syscall.ENOSYS

// Engine errors are matched by their errno where they carry one; these are
// the ones that only wrap fs errors or context errors.
var errnoByError = []struct {
	err   error
	errno syscall.Errno
}{
	{fs.ErrNotExist, syscall.ENOENT},
	{fs.ErrPermission, syscall.EACCES},
	{fs.ErrExist, syscall.EEXIST},
	{fs.ErrInvalid, syscall.EINVAL},
	{context.Canceled, syscall.EINTR},
	{context.DeadlineExceeded, syscall.ETIMEDOUT},
}

// extraErrnos lets the engine adapter add its own sentinel errors.
var extraErrnos []struct {
	err   error
	errno syscall.Errno
}

// errnoOf returns err unchanged if it carries an errno, and otherwise err
// wrapped with the errno that fits it best (EIO if none does).
func errnoOf(err error) error {
	if err == nil {
		return nil
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return err
	}
	for _, m := range append(errnoByError, extraErrnos...) {
		if errors.Is(err, m.err) {
			return errors.Join(err, m.errno)
		}
	}
	return errors.Join(err, syscall.EIO)
}

// outOfFilesEvery bounds how often the server logs that it ran out of
// descriptors.
const outOfFilesEvery = time.Minute

// noteOutOfFiles logs, at most every outOfFilesEvery, that a request
// failed for want of a descriptor (EMFILE, ENFILE). The callers see the
// errno of their own open(2) failing with a table of theirs far from full;
// the server's log says which process ran out, and its limit. Nothing
// written is lost: a write-back that fails so is retried.
func (s *Server) noteOutOfFiles(op wire.Op, err error) {
	if !errors.Is(err, syscall.EMFILE) && !errors.Is(err, syscall.ENFILE) {
		return
	}
	now, last := time.Now().UnixNano(), s.outOfFilesLogged.Load()
	if last != 0 && now-last < int64(outOfFilesEvery) || !s.outOfFilesLogged.CompareAndSwap(last, now) {
		return
	}
	var lim unix.Rlimit
	_ = unix.Getrlimit(unix.RLIMIT_NOFILE, &lim)
	s.log.Warn("Requests fail for want of file descriptors; raise the server's limit of open files (ulimit -n)",
		"op", op, "limit", lim.Cur, "err", err)
}
