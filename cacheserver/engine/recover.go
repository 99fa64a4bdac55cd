package engine

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/index"
)

// recover rebuilds the in-memory state from the index. Slots no entry names
// are free: they hold data written before a crash whose index commit never
// happened, which is harmless to reuse.
func (e *Engine) recover() error {
	used := make([]bool, e.slab.Slots())
	var dirty []*extent
	err := e.idx.Load(
		func(p string, r index.File) error {
			f := e.fileLocked(p)
			f.size, f.cred, f.record = r.Size, r.Cred, true
			if e.cfg.Share.counts(p) {
				e.nfile++
			}
			if r.Dooms > 0 {
				// Unlinks were under way: the clients that began them may
				// still end them, each with EndDoom and its id, so the doom
				// holds for DoomTimeout from now, with its count, unless
				// the backing file is gone (dropRemovedDooms).
				f.doomed, f.doomedAt = int(r.Dooms), e.cfg.Clock.Now()
				f.doomedID = backing.FileID{Ino: r.DoomedIno, Birth: r.DoomedBirth, Gen: r.DoomedGen}
				f.unlinks = r.Unlinks
				e.dooms[f] = struct{}{}
			}
			return nil
		},
		func(k index.Key, r index.Extent) error {
			x, err := e.recoverExtent(k, r, used)
			if err == nil && x.dirty() {
				dirty = append(dirty, x)
			}
			return err
		})
	if err != nil {
		return fmt.Errorf("loading index: %w", err)
	}
	if err := e.idx.LoadChanges(e.recoverChange); err != nil {
		return fmt.Errorf("loading index: %w", err)
	}
	if err := e.idx.LoadSources(e.recoverSource); err != nil {
		return fmt.Errorf("loading index: %w", err)
	}
	slices.SortFunc(dirty, func(a, b *extent) int { return a.lastWrite.Compare(b.lastWrite) })
	for _, x := range dirty {
		e.dirty.pushBack(x)
		x.f.dirtyExtents++
	}
	for s := len(used) - 1; s >= 0; s-- {
		if !used[s] {
			e.free.push(int32(s))
		}
	}
	e.log.Info("Recovered cache index", "dir", e.cfg.Dir, "files", len(e.files),
		"extents", e.used, "dirtyExtents", len(dirty), "freeSlots", e.free.len(),
		"unsyncedChanges", len(e.changedNames)+len(e.changedAttrs))
	return nil
}

// recoverChange takes up a name or an inode that a call through the cache
// changed on the backing store before the engine stopped, and that no
// fsync made durable since: the next flush makes it durable (rule 8).
func (e *Engine) recoverChange(c index.Change, r index.ChangeRecord) error {
	e.nameSeq++
	e.changedLocked(c.Kind)[c.Path] = nameChange{cred: r.Cred, seq: e.nameSeq}
	e.changesStored[c] = struct{}{}
	return nil
}

var errCorruptIndex = errors.New("index names an impossible slot")

// recoverExtent adds one indexed extent. A dirty extent is treated as dirty
// over its whole valid range: writes into a dirty extent go to its slot in
// place, and a crash before their index commit leaves bytes outside the
// committed dirty range that may differ from the backing file. Writing back
// [0, valid) makes them consistent again; those bytes are data of the file
// either way (copied up, or written by the application).
func (e *Engine) recoverExtent(k index.Key, r index.Extent, used []bool) (*extent, error) {
	if int64(r.Slot) >= int64(len(used)) || used[r.Slot] || int64(r.Valid) > e.es {
		return nil, fmt.Errorf("extent %v slot %d: %w", k, r.Slot, errCorruptIndex)
	}
	used[r.Slot] = true
	f := e.fileLocked(k.Path)
	x := &extent{f: f, idx: k.Index, state: ready, slot: int32(r.Slot), valid: int32(r.Valid),
		lastWrite: time.Unix(0, r.LastWrite)}
	f.extents[k.Index] = x
	e.used++
	if committedDirty(r) {
		e.durableDirty[k] = x.slot
		f.size = max(f.size, k.Index*e.es+int64(r.Valid))
		x.lo, x.hi, x.dirtySince, x.recovered = 0, x.valid, x.lastWrite, true
		e.dirtyBytes += int64(x.hi)
		if r.DirtyLo != 0 || r.DirtyHi != r.Valid {
			e.idxExt[k] = struct{}{}
		}
		return x, nil
	}
	e.clean.pushBack(x)
	return x, nil
}
