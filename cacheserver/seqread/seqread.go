package seqread

// Confirm is how many steps in a row, each one stride of extents after the
// one before, make a stream sequential, unless Streams.Confirm says
// otherwise.
const Confirm = 2

// MaxStreams is how many readers of one file Streams follows; a read that
// continues none of them replaces the one read least recently.
const MaxStreams = 8

// Streams follows the readers of one file. The zero value follows none
// yet, and takes a stream for sequential after the package's Confirm
// steps. It is not safe for concurrent use.
type Streams struct {
	// Confirm, if positive, replaces the package's Confirm: a caller for
	// whom reading ahead for nothing costs little, and waiting for each
	// step much, may take fewer.
	Confirm int

	s     []stream
	clock uint64
}

// stream is one reader: the extent it read last, how many steps in order
// led to it, and the last extent read ahead of it.
type stream struct {
	last, ahead int64
	run         int
	used        uint64
}

// Ahead is a range of extents to read ahead, First to Last by Stride; it is
// empty when First > Last.
type Ahead struct {
	First, Last, Stride int64
}

// Empty reports whether there is nothing to read ahead.
func (a Ahead) Empty() bool { return a.First > a.Last }

// Read records a read of extent idx, whose next extent is stride later,
// reports whether it continues a sequential stream, and returns what to
// read ahead of it within window extents. It is ReadAt for a read at the
// head of the extent.
func (s *Streams) Read(idx, stride int64, window int) (seq bool, ahead Ahead) {
	return s.ReadAt(idx, stride, true, window)
}

// ReadAt is Read for a read that starts at the head of extent idx or
// further in. A reader in order comes to each extent at its head, while a
// random reader lands anywhere in it: only steps to the head of the next
// extent count towards making a stream sequential. Random readers come to
// the extent after one they read by chance every few dozen reads when a
// file has a few hundred extents and eight streams are followed, and
// counting those steps took one such reader in 250 reads for sequential,
// each time reading a whole window ahead for nothing. A step elsewhere
// moves the stream along without counting, so a stream taken for
// sequential keeps its read-ahead when requests come out of order.
func (s *Streams) ReadAt(idx, stride int64, head bool, window int) (seq bool, ahead Ahead) {
	st := s.find(idx, stride)
	switch {
	case st == nil:
		s.replace(idx)
		return false, none
	case st.last == idx:
		return st.run >= s.confirm(), none
	}
	st.last = idx
	if head || st.run >= s.confirm() {
		st.run++
	}
	if st.run < s.confirm() {
		return false, none
	}
	return true, st.window(idx, stride, window)
}

// Sequential records a read of extent idx by a reader that the caller knows
// to be sequential, and returns what to read ahead of it within window
// extents.
func (s *Streams) Sequential(idx, stride int64, window int) Ahead {
	st := s.find(idx, stride)
	if st == nil {
		st = s.replace(idx)
	}
	st.last, st.run = idx, max(st.run, s.confirm())
	return st.window(idx, stride, window)
}

var none = Ahead{First: 1, Last: 0, Stride: 1}

func (s *Streams) confirm() int {
	if s.Confirm > 0 {
		return s.Confirm
	}
	return Confirm
}

// find returns the stream that read extent idx or the one a stride before
// it, and marks it used; nil if none did. Of several, it takes the one
// with the longest run in order, and of those the one at idx: a stream that
// reached idx by chance must not capture the reader that goes on from it.
func (s *Streams) find(idx, stride int64) *stream {
	var best *stream
	for i := range s.s {
		st := &s.s[i]
		if st.last != idx && st.last != idx-stride {
			continue
		}
		if best == nil || st.run > best.run || st.run == best.run && st.last == idx {
			best = st
		}
	}
	if best != nil {
		s.clock++
		best.used = s.clock
	}
	return best
}

// replace starts a stream at idx, in place of the stream read least
// recently once there are MaxStreams.
func (s *Streams) replace(idx int64) *stream {
	s.clock++
	st := stream{last: idx, ahead: idx, used: s.clock}
	if len(s.s) < MaxStreams {
		s.s = append(s.s, st)
		return &s.s[len(s.s)-1]
	}
	old := 0
	for i := range s.s {
		if s.s[i].used < s.s[old].used {
			old = i
		}
	}
	s.s[old] = st
	return &s.s[old]
}

// window returns the extents to read ahead of a reader at idx: the rest of
// the window once half of it is consumed, or nothing before then.
func (st *stream) window(idx, stride int64, window int) Ahead {
	end := idx + int64(window)*stride
	next := idx + stride
	if st.ahead >= next && st.ahead <= end {
		if st.ahead > idx+int64(window/2)*stride {
			return none
		}
		next = st.ahead + stride
	}
	st.ahead = end
	return Ahead{First: next, Last: end, Stride: stride}
}
