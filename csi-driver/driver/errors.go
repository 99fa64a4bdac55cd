package driver

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/burstcache/burstcache/csi-driver/mounter"
	"github.com/burstcache/burstcache/csi-driver/volume"
)

// Sentinel errors of the node service. Inside the package, errors are plain
// Go errors wrapping these; rpcError turns them into gRPC status codes at the
// RPC boundary, in one place.
var (
	// ErrInvalid is a request that can never succeed as written.
	ErrInvalid = errors.New("invalid request")
	// ErrNotFound is a volume whose CacheInstance does not exist.
	ErrNotFound = errors.New("not found")
	// ErrUnavailable is a volume that cannot be served now but may later: an
	// instance that is not Ready, or a mount being remounted.
	ErrUnavailable = errors.New("unavailable")
	// ErrBusy is a call for a volume that another call is working on.
	ErrBusy = errors.New("another call for the volume is in progress")
	// ErrNotStaged is a publish of a volume that is not staged on the node.
	ErrNotStaged = errors.New("volume is not staged")
	// ErrStillPublished is an unstage of a volume that is still published.
	ErrStillPublished = errors.New("volume is still published")
	// ErrIncompatible is a call for a volume that is already staged or
	// published at the same place with other options.
	ErrIncompatible = errors.New("already exists with other options")
)

// codeOf maps an error of the node service to its gRPC code.
func codeOf(err error) codes.Code {
	table := []struct {
		err  error
		code codes.Code
	}{
		{ErrInvalid, codes.InvalidArgument},
		{volume.ErrBadID, codes.InvalidArgument},
		{ErrNotFound, codes.NotFound},
		{ErrUnavailable, codes.Unavailable},
		{ErrBusy, codes.Aborted},
		{ErrNotStaged, codes.FailedPrecondition},
		{ErrStillPublished, codes.FailedPrecondition},
		{ErrIncompatible, codes.AlreadyExists},
		{mounter.ErrStopTimeout, codes.DeadlineExceeded},
		{mounter.ErrNotReady, codes.Unavailable},
		{context.DeadlineExceeded, codes.DeadlineExceeded},
		{context.Canceled, codes.Canceled},
	}
	for _, t := range table {
		if errors.Is(err, t.err) {
			return t.code
		}
	}
	return codes.Internal
}

// rpcError returns err as a gRPC status error. Errors that already carry a
// status (from a controller service served alongside) keep it.
func rpcError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codeOf(err), err.Error())
}
