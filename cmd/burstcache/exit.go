package main

import (
	"fmt"
	"strconv"
	"strings"
)

// Exit codes of the server, mount and local commands, besides 1 for any
// other failure.
const (
	// exitBadInput: a flag or argument is wrong, or a directory named by one
	// is missing or unusable.
	exitBadInput = 2
	// exitForeignCacheDir: the cache directory belongs to another instance,
	// or another server has it open.
	exitForeignCacheDir = 3
	// exitMountBusy: the mount point is already a mount point or in use.
	exitMountBusy = 4
	// exitUnreachable: a cache server cannot be reached.
	exitUnreachable = 5
	// exitWriteBack: dirty data could not all be written back; it stays in
	// the cache directories.
	exitWriteBack = 6
	// exitUnpublished: the mount could not make durable or publish all it
	// was given (a server was unreachable, or restarted and lost writes);
	// its log names the files.
	exitUnpublished = 7
)

// codeError is an error with the exit code it should end the process with.
type codeError struct {
	code int
	err  error
}

// Error returns the message of the wrapped error.
func (e *codeError) Error() string { return e.err.Error() }

// Unwrap returns the wrapped error.
func (e *codeError) Unwrap() error { return e.err }

// ExitCode returns the process exit code for the error.
func (e *codeError) ExitCode() int { return e.code }

// withCode gives err the exit code code, keeping nil as nil.
func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &codeError{code: code, err: err}
}

// badInput formats an error with exitBadInput.
func badInput(format string, args ...any) error {
	return withCode(exitBadInput, fmt.Errorf(format, args...))
}

// parseSize reads a byte count: a plain number, or one with a binary (Ki,
// Mi, Gi, Ti) or decimal (k, K, M, G, T) suffix, as Kubernetes quantities
// are written.
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{
		{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
		{"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12},
	}
	mult := int64(1)
	num := s
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("bad size %q: want a byte count such as 1048576, 1Mi or 10Gi", s)
	}
	return n * mult, nil
}

// sizeFlag is a pflag.Value of a byte count.
type sizeFlag int64

// String formats the size in bytes.
func (s *sizeFlag) String() string { return strconv.FormatInt(int64(*s), 10) }

// Type names the flag type in help texts.
func (s *sizeFlag) Type() string { return "size" }

// Set parses a size.
func (s *sizeFlag) Set(v string) error {
	n, err := parseSize(v)
	if err != nil {
		return err
	}
	*s = sizeFlag(n)
	return nil
}
