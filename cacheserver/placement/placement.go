package placement

import "hash/fnv"

// DefaultExtentSize is the extent size of an instance that does not set one.
const DefaultExtentSize = 1 << 20

// Layout places extents and metadata on Servers servers.
type Layout struct {
	Servers    int
	ExtentSize int64
}

// Hash returns the FNV-1a 64 hash of path.
func Hash(path string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(path))
	return h.Sum64()
}

// MetaServer returns the server that runs metadata operations on path.
func (l Layout) MetaServer(path string) int {
	return int(Hash(path) % uint64(l.Servers))
}

// ExtentServer returns the server that holds extent e of path.
func (l Layout) ExtentServer(path string, e int64) int {
	return int((Hash(path)%uint64(l.Servers) + uint64(e)%uint64(l.Servers)) % uint64(l.Servers))
}

// Piece is the part of an I/O request that falls in one extent.
type Piece struct {
	// Server holds the extent.
	Server int
	// Off is the file offset of the piece.
	Off int64
	// Start and End delimit the piece in the caller's buffer.
	Start, End int
}

// Split cuts the request for n bytes at off of path at extent boundaries.
func (l Layout) Split(path string, off int64, n int) []Piece {
	var pieces []Piece
	for start := 0; start < n; {
		pos := off + int64(start)
		e := pos / l.ExtentSize
		end := min(n, start+int(((e+1)*l.ExtentSize)-pos))
		pieces = append(pieces, Piece{Server: l.ExtentServer(path, e), Off: pos, Start: start, End: end})
		start = end
	}
	return pieces
}
