package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/cacheserver/durable"
	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// hiddenNames records the hidden names a mount gives files that are
// unlinked while it has them open (wire.OpNoteHidden), with the identity
// that hid each. The mount removes a hidden name at the file's last close;
// one that dies first leaves it in the backing store, where nobody would
// ever remove it. The teardown of the instance, once nothing mounts it and
// the data is written back, has every server remove the names it recorded
// (RemoveHidden).
//
// A mount notes the name with the server that removes it (the metadata
// server of the hidden name), so that the record goes when the name does.
// The records live in a log in the cache directory, one JSON object a
// line: a note is appended and synced before it is answered, so the mount
// renames the file only once a crash of the server can no longer lose the
// record; a removal is appended without a sync, since a record whose
// removal was lost only makes the teardown find the name gone. Opening the
// log replays it and rewrites it without the removed records, and so does
// a removal once they outnumber the live ones; a torn last line, from a
// crash while it was appended, belongs to a note that was never answered,
// and is dropped.
type hiddenNames struct {
	mu    sync.Mutex
	path  string // "" keeps the records in memory only
	f     *os.File
	names map[string]hiddenNote
	// stale counts the lines of the log that a rewrite would drop.
	stale int
}

// hiddenNote is what a server knows of a hidden name: who hid the file,
// and why; for a rename, the creation time of the file it moves, as the
// server found it when the note came (0 where the file system does not
// tell it): its inode number alone may be another file's by the
// teardown, since file systems give freed numbers out again at once.
type hiddenNote struct {
	cred        ident.Cred
	why         namespace.Hiding
	sourceBirth int64
}

// hiddenRewriteAt is how many stale lines a log may hold, beyond twice the
// live records, before a removal rewrites it.
const hiddenRewriteAt = 1024

// HiddenNamesFile is the name of the log of hidden names in a server's
// cache directory.
const HiddenNamesFile = "hidden-names.jsonl"

// hiddenRecord is a line of the log. The path goes byte for byte (see
// control.Path): a hidden name is in the directory of its file, whose name
// may be any bytes. A release that reads paths as strings passes over the
// lines of paths that are not UTF-8, and so leaves those names in place,
// rather than remove another file.
type hiddenRecord struct {
	Path    control.Path `json:"path"`
	Removed bool         `json:"removed,omitempty"`
	UID     uint32       `json:"uid,omitempty"`
	GID     uint32       `json:"gid,omitempty"`
	Groups  []uint32     `json:"groups,omitempty"`
	// Caps are the capabilities of the identity, when they were known.
	Caps *uint64 `json:"caps,omitempty"`
	// From, Source and SourceIno say that the file was hidden to make way
	// for a rename (namespace.Hiding), and SourceBirth when the file the
	// rename moves was created (hiddenNote).
	From        control.Path `json:"from,omitempty"`
	Source      control.Path `json:"source,omitempty"`
	SourceIno   uint64       `json:"sourceIno,omitempty"`
	SourceBirth int64        `json:"sourceBirth,omitempty"`
}

// recordOf returns the log line that says n.cred hid p.
func recordOf(p string, n hiddenNote) hiddenRecord {
	c := n.cred
	r := hiddenRecord{Path: control.Path(p), UID: c.UID, GID: c.GID, Groups: c.Groups,
		From: control.Path(n.why.Name), Source: control.Path(n.why.Source), SourceIno: n.why.SourceIno, SourceBirth: n.sourceBirth}
	if c.HasCaps {
		caps := uint64(c.Caps)
		r.Caps = &caps
	}
	return r
}

// note returns what a log line says.
func (r hiddenRecord) note() hiddenNote {
	c := ident.Cred{UID: r.UID, GID: r.GID, Groups: r.Groups}
	if r.Caps != nil {
		c.Caps, c.HasCaps = ident.Caps(*r.Caps)&ident.FSCaps, true
	}
	return hiddenNote{cred: c, why: namespace.Hiding{Name: string(r.From), Source: string(r.Source), SourceIno: r.SourceIno}, sourceBirth: r.SourceBirth}
}

// openHiddenNames opens the log at path, creating it if needed; an empty
// path keeps the records in memory.
func openHiddenNames(path string) (*hiddenNames, error) {
	h := &hiddenNames{path: path, names: map[string]hiddenNote{}}
	if path == "" {
		return h, nil
	}
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading the hidden names: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r hiddenRecord
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			continue
		}
		if r.Removed {
			delete(h.names, string(r.Path))
		} else {
			h.names[string(r.Path)] = r.note()
		}
	}
	if err := h.rewrite(); err != nil {
		return nil, err
	}
	return h, nil
}

// rewrite replaces the log with the records in h.names, atomically: a
// crash leaves the old log or the new one, which say the same.
func (h *hiddenNames) rewrite() error {
	var buf bytes.Buffer
	for p, n := range h.names {
		line, err := json.Marshal(recordOf(p, n))
		if err != nil {
			return err
		}
		buf.Write(append(line, '\n'))
	}
	// Durable step: the new log. A crash before it finds the old log,
	// which says the same.
	if err := durable.WriteFile(h.path, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("writing the hidden names: %w", err)
	}
	if h.f != nil {
		h.f.Close()
	}
	f, err := os.OpenFile(h.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("opening the hidden names: %w", err)
	}
	h.f, h.stale = f, 0
	return nil
}

// note records that n.cred hid a file under the name p, durably; a note
// that only says that a name recorded for a rename is now one of a file
// unlinked (the rename took place) is not synced, since the record before
// it, which a crash would leave, says nothing the teardown would get
// wrong but for a renamed file moved back where it came from, and a sync
// would cost every rename over an open file a disk flush more.
func (h *hiddenNames) note(p string, n hiddenNote) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, known := h.names[p]
	if err := h.append(recordOf(p, n), !known || n.why.Name != ""); err != nil {
		return err
	}
	if known {
		h.stale++
	}
	h.names[p] = n
	return nil
}

// forget drops the record of p, if there is one: the name is gone.
func (h *hiddenNames) forget(p string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.names[p]; !ok {
		return
	}
	delete(h.names, p)
	// A lost removal only makes the teardown find the name gone.
	_ = h.append(hiddenRecord{Path: control.Path(p), Removed: true}, false)
	if h.stale += 2; h.f != nil && h.stale > hiddenRewriteAt+2*len(h.names) {
		if err := h.rewrite(); err != nil {
			// The log only grows meanwhile; the next removal tries again.
			h.stale = 0
		}
	}
}

func (h *hiddenNames) append(r hiddenRecord, sync bool) error {
	if h.f == nil {
		return nil
	}
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := h.f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("recording a hidden name: %w", err)
	}
	if sync {
		// Durable step: the note. A crash before it loses the record of
		// a name the mount has not made yet, since the note is answered
		// only after the sync.
		if err := h.f.Sync(); err != nil {
			return fmt.Errorf("recording a hidden name: %w", err)
		}
	}
	return nil
}

// records returns a copy of the recorded names, each with what its note
// said.
func (h *hiddenNames) records() map[string]hiddenNote {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.names)
}

func (h *hiddenNames) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.names)
}

func (h *hiddenNames) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f != nil {
		h.f.Close()
		h.f = nil
	}
}

// noteHidden records the hidden name a mount is about to give a file
// unlinked while open, or replaced by a rename, with the caller's identity
// and, for a rename, the file's name and the file the rename moves.
func (s *Server) noteHidden(ctx context.Context, req *wire.Request, _ *wire.Response) error {
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	var n hiddenNote
	if req.Args.More() {
		// A mount of an earlier release sends the path alone.
		if n.why.Name, err = readPath(req.Args); err != nil {
			return err
		}
		if n.why.Source, err = readPath(req.Args); err != nil {
			return err
		}
		n.why.SourceIno = req.Args.Uint64()
		if err := req.Args.Err(); err != nil {
			return err
		}
		if path.Dir(n.why.Name) != path.Dir(p) {
			// A mount hides a file in its own directory; the teardown
			// moves nothing elsewhere.
			return syscall.EINVAL
		}
	}
	var ok bool
	if n.cred, ok = ident.FromContext(ctx); !ok {
		n.cred = s.cfg.Cred
	}
	if n.why.Name != "" {
		// The file the rename moves, as the backing store has it now,
		// before the rename: the teardown compares it with what it finds.
		if a, err := s.identity(ctx, n.why.Source); err == nil {
			n.why.SourceIno, n.sourceBirth = a.Ino, a.Birth
		}
	}
	return s.hidden.note(p, n)
}

// RemoveHidden removes from the backing store, as the identity that hid
// each, the hidden names this server recorded, and forgets what it caches
// of them. Only the teardown of the instance calls it, once nothing mounts
// the instance and every server wrote its data back: a name still open
// somewhere would lose its file, and data not yet written back would bring
// the file back. A name already gone counts as removed. It returns how many
// names it removed; the ones it could not remove stay recorded, and the
// error names them.
//
// A file hidden to make way for a rename over it, whose rename then
// failed, and whose mount ended before it could give the file its name
// back (a server it needed was down), gets its name back instead, or a
// name beside it if another file took the name (giveBack). It counts as
// removed.
func (s *Server) RemoveHidden(ctx context.Context) (control.HiddenResult, error) {
	var res control.HiddenResult
	var errs []error
	recs := s.hidden.records()
	for _, p := range slices.Sorted(maps.Keys(recs)) {
		cctx := ident.NewContext(ctx, recs[p].cred)
		as, err := s.giveBack(cctx, p, recs[p])
		if as != "" {
			res.GivenBack = append(res.GivenBack, control.GivenBack{Path: control.Path(recs[p].why.Name), As: control.Path(as)})
		}
		if err == nil && as == "" {
			err = s.cfg.NS.Unlink(cctx, p)
		}
		if errors.Is(err, syscall.ENOENT) {
			err = nil
		}
		if err == nil {
			err = s.cfg.Cache.Drop(cctx, p)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%q: %w", p, err))
			continue
		}
		s.hidden.forget(p)
		res.Removed++
	}
	if len(errs) > 0 {
		s.log.Warn("Some hidden names of files unlinked while open stay in the backing store", "left", len(errs), "err", errors.Join(errs...))
		return res, fmt.Errorf("removing hidden names of files unlinked while open: %w", errors.Join(errs...))
	}
	if res.Removed > 0 {
		s.log.Info("Removed the hidden names of files unlinked while open by mounts that ended first", "removed", res.Removed, "givenBack", len(res.GivenBack))
	}
	return res, nil
}

// giveBack gives the file hidden as p its name back if it was hidden for
// a rename (n.why) that did not take place: the file the rename was to
// move is still at its path, the same file (its inode number, and its
// creation time where the file system tells it). A file that another
// took the name of meanwhile gets a name beside it (namespace.KeptInfix),
// and so does one whose identity the note could not record in full: the
// inode number of a file removed since may be a new file's, and the file
// must neither be lost nor take the name of one removed. It returns the
// name it gave the file, or "" if it left the file alone; a hidden name
// already gone is no error.
func (s *Server) giveBack(ctx context.Context, p string, n hiddenNote) (string, error) {
	why := n.why
	if why.Name == "" || why.SourceIno == 0 {
		return "", nil
	}
	a, err := s.identity(ctx, why.Source)
	switch {
	case errors.Is(err, syscall.ENOENT) || err == nil && (a.Ino != why.SourceIno || n.sourceBirth != 0 && a.Birth != n.sourceBirth):
		// The rename took place, and replaced the file; or the file it
		// was to move went since, which no mount can tell from that.
		return "", nil
	case err != nil:
		// Whether the rename took place is not known: the file stays.
		return "", fmt.Errorf("looking for %q, whose rename over %q may have failed: %w", why.Source, why.Name, err)
	}
	name := why.Name
	if n.sourceBirth == 0 {
		name = namespace.KeptName(why.Name, rand.Uint64())
	}
	err = s.cfg.NS.Rename(ctx, p, name, unix.RENAME_NOREPLACE)
	if errors.Is(err, syscall.EEXIST) {
		name = namespace.KeptName(why.Name, rand.Uint64())
		err = s.cfg.NS.Rename(ctx, p, name, unix.RENAME_NOREPLACE)
	}
	switch {
	case errors.Is(err, syscall.ENOENT):
		return "", nil
	case err != nil:
		return "", err
	}
	if name == why.Name {
		s.log.Warn("Gave a file hidden for a rename that failed its name back", "path", name, "hidden", p)
	} else {
		s.log.Error("A file hidden for a rename that may have failed is kept beside its name: another file took the name, or the file system does not tell whether the file the rename was to move is the same one",
			"path", why.Name, "kept", name)
	}
	// What this server cached under either name is of no file now.
	return name, errors.Join(s.cfg.Cache.Drop(ctx, p), s.cfg.Cache.Drop(ctx, name), s.cfg.Cache.NamesMoved(ctx, p, name))
}

// identity returns the attributes of p in the backing store with its
// creation time, where the namespace and the file system tell it.
func (s *Server) identity(ctx context.Context, p string) (namespace.Attr, error) {
	if id, ok := s.cfg.NS.(namespace.Identifier); ok {
		return id.Identity(ctx, p)
	}
	return s.cfg.NS.GetAttr(ctx, p)
}
