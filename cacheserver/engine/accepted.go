package engine

import "context"

type acceptedKey struct{}

// Accepted marks ctx for writes whose bytes the job was already told were
// written: pages of a client's page cache that its kernel writes back. The
// job cannot retry such a write, and a kernel drops the pages of one that
// fails, so the cache's own limits on new writes (the write window and
// MaxFiles) do not turn it away; its bytes count in the write window as
// every write's do. MaxFileSize, a limit of the file the job wrote past,
// still holds.
func Accepted(ctx context.Context) context.Context {
	return context.WithValue(ctx, acceptedKey{}, true)
}

// accepted reports whether ctx was marked by Accepted.
func accepted(ctx context.Context) bool {
	v, _ := ctx.Value(acceptedKey{}).(bool)
	return v
}
