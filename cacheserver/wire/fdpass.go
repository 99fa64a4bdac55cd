package wire

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/ident"
)

// ErrNotLocal is returned by FetchFile for a server that is not reached
// over a Unix domain socket, and by servers for a descriptor asked for over
// TCP: descriptors pass only between processes of one machine.
var ErrNotLocal = fmt.Errorf("descriptors pass only over a Unix socket: %w", syscall.EOPNOTSUPP)

// IsLocal reports whether a server at addr is reached over a Unix domain
// socket, on this machine.
func IsLocal(addr string) bool { return network(addr) == "unix" }

// writeFrameFile writes the frame of h and meta with the descriptor of f
// attached (SCM_RIGHTS), on a Unix socket.
func (w *frameWriter) writeFrameFile(h header, meta []byte, f *os.File) error {
	uc, ok := w.nc.(*net.UnixConn)
	if !ok {
		return ErrNotLocal
	}
	b := make([]byte, headerSize+len(meta))
	h.put(b)
	copy(b[headerSize:], meta)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.bw.Flush(); err != nil {
		return err
	}
	n, _, err := uc.WriteMsgUnix(b, unix.UnixRights(int(f.Fd())), nil)
	if err == nil && n < len(b) {
		_, err = uc.Write(b[n:])
	}
	return err
}

// FetchFile sends one call over a connection of its own to the server at
// addr, a Unix socket, and returns the file descriptor the server attached
// to its reply, with the reply's metadata. The connection is closed before
// it returns.
func FetchFile(ctx context.Context, addr string, creds Credentials, cred ident.Cred, op Op, args []byte) (*os.File, []byte, error) {
	if !IsLocal(addr) {
		return nil, nil, ErrNotLocal
	}
	d := net.Dialer{Timeout: DefaultDialTimeout}
	deadline := time.Now().Add(DefaultDialTimeout)
	if dl, ok := ctx.Deadline(); ok {
		deadline = dl
	}
	nc, key, err := greet(addr, creds, func() (net.Conn, error) {
		nc, err := d.DialContext(ctx, "unix", addr)
		if err != nil {
			return nil, fmt.Errorf("dialing cache server %s: %w", addr, errnoOf(err))
		}
		_ = nc.SetDeadline(deadline)
		return nc, nil
	})
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = nc.Close() }()
	var e Encoder
	cred.Caps, cred.HasCaps = 0, false // as a server of any release reads it
	e.Cred(cred)
	meta := e.b
	meta = append(meta, args...)
	frame := make([]byte, headerSize, headerSize+len(meta)+tagSize)
	header{id: 1, code: uint32(op), meta: uint32(len(meta) + tagSize)}.put(frame)
	frame = append(frame, meta...)
	frame = append(frame, newSealer(key).tag(frame[:headerSize], meta)...)
	if _, err := nc.Write(frame); err != nil {
		return nil, nil, fmt.Errorf("asking cache server %s for a descriptor: %w", addr, ErrConnLost)
	}
	return receiveFile(nc.(*net.UnixConn))
}

// receiveFile reads one reply frame without a data section, and the
// descriptor that came with it.
func receiveFile(uc *net.UnixConn) (*os.File, []byte, error) {
	// Replies that carry a descriptor have little metadata; the buffer
	// grows once the header says how much.
	buf := make([]byte, headerSize+256)
	oob := make([]byte, unix.CmsgSpace(4))
	var f *os.File
	got := 0
	for {
		n, oobn, _, _, err := uc.ReadMsgUnix(buf[got:], oob)
		if oobn > 0 && f == nil {
			f = fileFromRights(oob[:oobn])
		}
		if err != nil {
			closeFile(f)
			return nil, nil, fmt.Errorf("reading a descriptor: %w: %v", ErrConnLost, err) //nolint:errorlint // a transport error's errno is not the operation's
		}
		got += n
		if got < headerSize {
			continue
		}
		h, herr := readHeader(bytes.NewReader(buf[:got]), make([]byte, headerSize))
		if herr != nil {
			closeFile(f)
			return nil, nil, herr
		}
		if want := headerSize + int(h.meta); got < want {
			if want > len(buf) {
				buf = append(buf, make([]byte, want-len(buf))...)
			}
			continue
		}
		if h.code != 0 {
			closeFile(f)
			return nil, nil, syscall.Errno(h.code)
		}
		if f == nil {
			return nil, nil, fmt.Errorf("%w: reply without a descriptor", ErrProtocol)
		}
		return f, buf[headerSize : headerSize+int(h.meta)], nil
	}
}

// fileFromRights returns the first descriptor of an SCM_RIGHTS message and
// closes any others.
func fileFromRights(oob []byte) *os.File {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var f *os.File
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if f == nil {
				f = os.NewFile(uintptr(fd), "cache-server-file")
				continue
			}
			_ = unix.Close(fd)
		}
	}
	return f
}

func closeFile(f *os.File) {
	if f != nil {
		_ = f.Close()
	}
}
