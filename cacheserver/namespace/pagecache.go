package namespace

import "context"

type pageCacheKey struct{}

// FromPageCache marks the context of a WriteAt whose bytes are pages of
// the kernel's page cache being written back: the job was told long ago
// that they were written, it cannot retry them, and the kernel drops the
// pages if the write fails. A cache takes such writes even past its own
// limits on new writes.
func FromPageCache(ctx context.Context) context.Context {
	return context.WithValue(ctx, pageCacheKey{}, true)
}

// IsFromPageCache reports whether ctx was marked by FromPageCache.
func IsFromPageCache(ctx context.Context) bool {
	v, _ := ctx.Value(pageCacheKey{}).(bool)
	return v
}
