package engine

import (
	"context"
	"fmt"
)

// Share is an engine's part of the limit on files (Tunables.MaxFiles) of an
// instance of Servers engines: each file is counted by exactly one engine,
// the one Counts says yes for, so that the files counted over the instance
// are the sum of what each engine counts. Engine Index (0 to Servers-1)
// may count MaxFiles/Servers of them, and one more if Index is below the
// remainder: the parts add up to MaxFiles, so the instance never holds
// more, though it refuses a file before MaxFiles when the files it counts
// do not spread evenly over the engines. The zero Share is a lone engine's:
// every file counts, against all of MaxFiles.
type Share struct {
	Index, Servers int
	// Counts reports whether path counts here; nil counts every path.
	Counts func(path string) bool
}

// Of returns the part of maxFiles that the engine of s may count.
func (s Share) Of(maxFiles int64) int64 {
	if s.Servers <= 1 {
		return maxFiles
	}
	n := int64(s.Servers)
	part := maxFiles / n
	if int64(s.Index) < maxFiles%n {
		part++
	}
	return part
}

// counts reports whether path counts against this engine's part.
func (s Share) counts(path string) bool {
	return s.Counts == nil || s.Counts(path)
}

// fullLocked reports whether the files counted here, records and
// reservations, reached the engine's part of MaxFiles.
func (e *Engine) fullLocked() bool {
	return e.tun.MaxFiles > 0 && e.nfile+e.reserved >= e.cfg.Share.Of(e.tun.MaxFiles)
}

// recordLocked gives f a file record, counted if its path counts here,
// even past the engine's part of MaxFiles: the limit holds where files are
// created and opened for writing (ReserveFile), not at the writes through
// a file that was, which may reach a name that holds no record of it (a
// file renamed while open, or unlinked while open, which a mount renames
// to a hidden name), and must not fail then.
func (e *Engine) recordLocked(f *file) {
	if f.record {
		return
	}
	f.record = true
	if e.cfg.Share.counts(f.path) {
		e.nfile++
	}
	e.markFileLocked(f)
}

// ReserveFile reserves room under MaxFiles for a file that the caller is
// about to create or open for writing, and that this engine counts but
// holds no record of: reserved says whether it did. It returns
// ErrTooManyFiles when the engine is full. A caller that reserved must end
// the reservation with EndReserve, whether its create succeeded or not:
// reserving first keeps two creates from both taking the last place.
func (e *Engine) ReserveFile(path string) (reserved bool, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.tun.MaxFiles <= 0 || !e.cfg.Share.counts(path) {
		return false, nil
	}
	if f := e.files[path]; f != nil && f.record {
		return false, nil
	}
	if e.fullLocked() {
		return false, fmt.Errorf("create %s: %d files: %w", path, e.nfile, ErrTooManyFiles)
	}
	e.reserved++
	return true, nil
}

// EndReserve ends a reservation of ReserveFile. With keep (the file was
// created or opened for writing, and has one name), the file gets a
// record in the reserved place, committed before EndReserve returns: a
// crash after the backing file was made and before the commit leaves that
// one file uncounted, a crash after it keeps it counted. Without keep the
// place is given back.
func (e *Engine) EndReserve(ctx context.Context, path string, keep bool) error {
	var err error
	if keep {
		if err = e.enter(); err == nil {
			defer e.leave()
			err = e.awaitUnlink(ctx, path)
		}
	}
	e.mu.Lock()
	e.reserved--
	if keep && err == nil {
		// The place is handed from the reservation to the record at once,
		// so that no other file takes it meanwhile.
		e.recordLocked(e.fileLocked(path))
	}
	e.mu.Unlock()
	if !keep || err != nil {
		return err
	}
	return e.waitCommit(ctx)
}
