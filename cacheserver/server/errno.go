package server

import (
	"context"
	"errors"
	"io/fs"
	"syscall"
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
