package wire

import "sync"

// bufSize is the capacity of pooled buffers: one extent-sized payload, the
// common case on the data path.
const bufSize = 1 << 20

var bufPool = sync.Pool{New: func() any { b := make([]byte, bufSize); return &b }}

// getBuf returns a buffer of length n, pooled when n fits a pooled buffer.
func getBuf(n int) []byte {
	if n > bufSize {
		return make([]byte, n)
	}
	return (*bufPool.Get().(*[]byte))[:n]
}

// putBuf returns a buffer obtained from getBuf to the pool.
func putBuf(b []byte) {
	if cap(b) != bufSize {
		return
	}
	b = b[:bufSize]
	bufPool.Put(&b)
}
