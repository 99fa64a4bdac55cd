package seqread

import (
	"math/rand/v2"
	"testing"
)

// extents lists what a returns.
func extents(a Ahead) []int64 {
	var xs []int64
	for i := a.First; i <= a.Last; i += a.Stride {
		xs = append(xs, i)
	}
	return xs
}

// TestOneReaderInOrder reads every second extent in order and checks that
// the stream counts as sequential from its Confirm-th step, and that every
// extent after that point is read ahead exactly once, in batches.
func TestOneReaderInOrder(t *testing.T) {
	const stride, window, n = 2, 8, 100
	var s Streams
	ahead := map[int64]int{}
	batches := 0
	for i := range int64(n) {
		idx := i * stride
		seq, a := s.Read(idx, stride, window)
		if want := i >= Confirm; seq != want {
			t.Fatalf("read %d (extent %d): sequential %v, want %v", i, idx, seq, want)
		}
		if !a.Empty() {
			batches++
		}
		for _, x := range extents(a) {
			if x <= idx || x%stride != 0 {
				t.Fatalf("read of extent %d reads ahead extent %d", idx, x)
			}
			ahead[x]++
		}
		if seq2, again := s.Read(idx, stride, window); !again.Empty() || seq2 != seq {
			t.Fatalf("a second read of extent %d: sequential %v, reads ahead %v", idx, seq2, extents(again))
		}
	}
	for i := int64(Confirm + 1); i < n; i++ {
		if ahead[i*stride] != 1 {
			t.Errorf("extent %d read ahead %d times, want once", i*stride, ahead[i*stride])
		}
	}
	if max := n/(window/2) + 2; batches > max {
		t.Errorf("%d batches for %d extents in order, want at most %d", batches, n, max)
	}
}

// TestRandomReadsRarelyReadAhead reads random extents of a file, as a
// random 4 KiB reader does, and checks that hardly any read counts as
// sequential: steps in order by chance are common. With one step enough,
// 1.5% of the reads here read a window ahead for nothing; with two, 0.025%.
func TestRandomReadsRarelyReadAhead(t *testing.T) {
	const reads = 100000
	var s Streams
	rng := rand.New(rand.NewPCG(1, 2))
	chance, seqs, ahead := 0, 0, 0
	last := int64(-1)
	for range reads {
		idx := rng.Int64N(512)
		if idx == last+1 {
			chance++
		}
		last = idx
		seq, a := s.Read(idx, 1, 8)
		if seq {
			seqs++
		}
		ahead += len(extents(a))
	}
	if chance < reads/1000 {
		t.Fatalf("only %d reads followed the one before by chance: the test proves nothing", chance)
	}
	if seqs > reads/1000 || ahead > 8*reads/1000 {
		t.Errorf("%d of %d random reads counted as sequential, reading %d extents ahead", seqs, reads, ahead)
	}
}

// TestInterleavedReaders reads disjoint segments of one file by several
// readers in turn, as processes of a job that share a file do, and checks
// that each is followed as sequential once it is confirmed.
func TestInterleavedReaders(t *testing.T) {
	const readers, steps, seg = MaxStreams, 20, 1000
	var s Streams
	for step := range int64(steps) {
		for r := range int64(readers) {
			seq, a := s.Read(r*seg+step, 1, 8)
			if want := step >= Confirm; seq != want {
				t.Fatalf("reader %d step %d: sequential %v, want %v", r, step, seq, want)
			}
			if step == Confirm && a.Empty() {
				t.Fatalf("reader %d reads nothing ahead once confirmed", r)
			}
		}
	}
}

// TestTooManyReaders checks that readers past MaxStreams replace the one
// read least recently instead of growing the table, and that a reader
// that comes back starts over.
func TestTooManyReaders(t *testing.T) {
	var s Streams
	for r := range int64(MaxStreams + 1) {
		for step := range int64(Confirm + 1) {
			s.Read(r*1000+step, 1, 8)
		}
	}
	if len(s.s) != MaxStreams {
		t.Fatalf("%d streams, want %d", len(s.s), MaxStreams)
	}
	if seq, _ := s.Read(Confirm+1, 1, 8); seq {
		t.Error("the reader replaced first still counts as sequential")
	}
	if seq, _ := s.Read(MaxStreams*1000+Confirm+1, 1, 8); !seq {
		t.Error("the reader seen last no longer counts as sequential")
	}
}

// TestSequentialHint checks that a reader the caller knows to be
// sequential is read ahead at once, and then in batches.
func TestSequentialHint(t *testing.T) {
	var s Streams
	a := s.Sequential(10, 2, 8)
	if got := extents(a); len(got) != 8 || got[0] != 12 || got[7] != 26 {
		t.Fatalf("the first hint reads ahead %v, want 12..26 by 2", got)
	}
	if a := s.Sequential(12, 2, 8); !a.Empty() {
		t.Errorf("the next hint reads ahead %v before half the window is read", extents(a))
	}
	if seq, _ := s.Read(14, 2, 8); !seq {
		t.Error("a read after hints does not continue their stream")
	}
}

// TestStaleStreamDoesNotCapture reads out of order first, leaving streams
// behind, then in order through the extents they stopped at, and checks
// that the reader in order is followed from its Confirm-th step.
func TestStaleStreamDoesNotCapture(t *testing.T) {
	var s Streams
	for _, idx := range []int64{5, 2, 9, 14, 3, 20} {
		s.Read(idx, 1, 8)
	}
	for idx := range int64(24) {
		seq, _ := s.Read(idx, 1, 8)
		if want := idx >= Confirm; seq != want {
			t.Fatalf("read of extent %d in order: sequential %v, want %v", idx, seq, want)
		}
	}
}

// TestConfirmOfItsOwn checks that Streams.Confirm replaces the package's.
func TestConfirmOfItsOwn(t *testing.T) {
	s := Streams{Confirm: 1}
	if seq, _ := s.Read(4, 2, 8); seq {
		t.Fatal("a first read counts as sequential")
	}
	if seq, a := s.Read(6, 2, 8); !seq || a.Empty() {
		t.Fatalf("one step in order with Confirm 1: sequential %v, reads ahead %v", seq, extents(a))
	}
}

// TestOnlyStepsToTheHeadConfirm checks that steps into the middle of the
// next extent, as a random reader's are, never make a stream sequential,
// that steps to the head do, and that a stream taken for sequential keeps
// reading ahead when a step comes in the middle of an extent.
func TestOnlyStepsToTheHeadConfirm(t *testing.T) {
	var s Streams
	for idx := range int64(20) {
		if seq, a := s.ReadAt(idx*2, 2, false, 8); seq || !a.Empty() {
			t.Fatalf("steps into the middle of extents taken for sequential at extent %d", idx*2)
		}
	}
	var in Streams
	for idx := range int64(Confirm + 1) {
		in.ReadAt(idx*2, 2, true, 8)
	}
	ahead := 0
	for idx := int64(Confirm + 1); idx < 20; idx++ {
		seq, a := in.ReadAt(idx*2, 2, false, 8)
		if !seq {
			t.Fatalf("a sequential stream stepping into the middle of extent %d is no longer sequential", idx*2)
		}
		ahead += len(extents(a))
	}
	if ahead == 0 {
		t.Error("a sequential stream stepping into the middle of extents read nothing ahead")
	}

	// A random reader of a file of 128 extents (one server's share of 256
	// extents over two), with the offsets it lands at in its extents.
	const extentSize, reads = 1 << 20, 4000
	r := rand.New(rand.NewPCG(1, 2))
	var random Streams
	windows := 0
	for range reads {
		off := r.Int64N(128 * extentSize)
		idx, at := off/extentSize, off%extentSize/4096*4096
		if _, a := random.ReadAt(idx*2, 2, at == 0, 8); !a.Empty() {
			windows++
		}
	}
	if windows > 1 {
		t.Errorf("%d random reads of 4 KiB read ahead %d times", reads, windows)
	}
}
