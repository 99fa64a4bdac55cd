package engine

import "math/rand/v2"

// Incarnation returns the number that names the run of the cache directory
// in which nothing this engine acknowledged can have been lost. A client
// that wrote through one incarnation and finds another when it makes the
// writes durable must report them lost: a crash between the two dropped
// whatever no commit covered. A clean Close keeps the number for the next
// Open, since it committed everything; a crash, or a Close that could not
// commit, makes the next Open draw a new one. It is never zero.
func (e *Engine) Incarnation() uint64 { return e.incarnation }

// takeIncarnation chooses the engine's incarnation as Open: the one stored
// clean by the previous Close, or a new one, and stores it unclean.
//
// Durable step: the incarnation, marked unclean, before the engine takes
// any call. A crash from here on, before a clean Close, makes the next Open
// draw a new incarnation. A crash before it finds the previous state: a
// clean incarnation, which no write of this run could have been taken
// under.
func (e *Engine) takeIncarnation() error {
	inc, clean, err := e.idx.Incarnation()
	if err != nil {
		return err
	}
	if !clean || inc == 0 {
		inc = newIncarnation()
	}
	if err := e.idx.SetIncarnation(inc, false); err != nil {
		return err
	}
	e.incarnation = inc
	return nil
}

// keepIncarnation marks the incarnation clean, once Close committed
// everything acknowledged.
//
// Durable step: a crash before it leaves the incarnation unclean, and the
// next Open draws a new one, which costs clients an error at their next
// sync, but loses nothing.
func (e *Engine) keepIncarnation() error {
	return e.idx.SetIncarnation(e.incarnation, true)
}

// newIncarnation returns a random number other than zero.
func newIncarnation() uint64 {
	for {
		if n := rand.Uint64(); n != 0 {
			return n
		}
	}
}
