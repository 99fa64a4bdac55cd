package pattern

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// Bytes returns the size bytes of the file called name: SHA-256 blocks of
// the name and a block counter, so no two extents of any file are alike.
func Bytes(name string, size int) []byte {
	out := make([]byte, 0, size+sha256.Size)
	var ctr [8]byte
	for i := uint64(0); len(out) < size; i++ {
		binary.BigEndian.PutUint64(ctr[:], i)
		sum := sha256.Sum256(append([]byte(name), ctr[:]...))
		out = append(out, sum[:]...)
	}
	return out[:size]
}

// Name returns the name of the i-th file of a workload.
func Name(i int) string {
	return fmt.Sprintf("file-%03d", i)
}
