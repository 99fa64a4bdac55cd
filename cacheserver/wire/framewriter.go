package wire

import (
	"bufio"
	"net"
	"sync"
	"sync/atomic"
)

// inlineData is the largest data section a frameWriter copies into its
// buffer; a larger one is written from where it is, with writev.
const inlineData = 16 << 10

// frameWriter writes whole frames to a connection from many goroutines. Small
// frames of goroutines that queue up behind each other share one write
// system call: each frame goes into a buffer, and the writer that finds no
// one queued behind it flushes the buffer. A lone writer flushes at once, so
// no frame waits for another.
//
// A client's writer tags each request (seal, see sealer) as it writes it,
// so that the tags follow the order the frames take on the connection.
type frameWriter struct {
	nc     net.Conn
	queued atomic.Int32 // writers waiting for or holding mu
	mu     sync.Mutex
	bw     *bufio.Writer
	seal   *sealer // nil for a server's replies; guarded by mu
}

func newFrameWriter(nc net.Conn, seal *sealer) *frameWriter {
	return &frameWriter{nc: nc, bw: bufio.NewWriterSize(nc, 64<<10), seal: seal}
}

// writeFrame writes the frame of h, meta and data.
func (w *frameWriter) writeFrame(h header, meta, data []byte) error {
	var hb [headerSize]byte
	var tag []byte
	w.queued.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seal != nil {
		h.meta += tagSize
		h.put(hb[:])
		tag = w.seal.tag(hb[:], meta)
	} else {
		h.put(hb[:])
	}
	last := w.queued.Add(-1) == 0
	if len(data) > inlineData || w.bw.Available() < headerSize+len(meta)+len(tag)+len(data) {
		if err := w.bw.Flush(); err != nil {
			return err
		}
	}
	if len(data) > inlineData {
		bufs := net.Buffers{hb[:], meta, tag, data}
		_, err := bufs.WriteTo(w.nc)
		return err
	}
	_, _ = w.bw.Write(hb[:])
	_, _ = w.bw.Write(meta)
	_, _ = w.bw.Write(tag)
	_, _ = w.bw.Write(data)
	if !last {
		return nil
	}
	return w.bw.Flush()
}
