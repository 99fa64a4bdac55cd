package wire

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestConcurrentCallsOfMixedSizes sends calls of small and large data
// sections from many goroutines at once over one connection, so that frames
// share writes in both directions, and checks that every answer comes back
// whole to its caller.
func TestConcurrentCallsOfMixedSizes(t *testing.T) {
	addr := startServer(t, "k")
	cl := NewClient(addr, ClientOptions{Secret: []byte("k"), Conns: 1})
	t.Cleanup(func() { cl.Close() })
	sizes := []int{0, 1, 100, 4096, inlineData, inlineData + 1, directRead + 7, 300 << 10}
	// A frame left in a buffer that nobody flushes shows as a call that
	// never returns.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 32 {
		wg.Go(func() {
			for i := range 40 {
				n := sizes[(g+i)%len(sizes)]
				data := bytes.Repeat([]byte{byte(g), byte(i)}, n/2+1)[:n]
				tag := fmt.Sprintf("%d/%d", g, i)
				rep, err := cl.Do(ctx, &Call{Op: opEcho, Args: (&Encoder{}).String(tag).Bytes(), Data: data})
				if err != nil {
					errs <- err
					return
				}
				if got := NewDecoder(rep.Meta).String(); got != tag || !bytes.Equal(rep.Data[:rep.N], data) {
					errs <- fmt.Errorf("call %s got the answer of %s, %d bytes of %d", tag, got, rep.N, n)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
