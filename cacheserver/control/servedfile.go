package control

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// The file of a servedLog is a header and slots of servedRecordSize bytes
// each; see servedLog for what they hold and why.
const servedRecordSize = 64

// servedHeader is the first record of the file: it names the format, so
// that a file of the earlier format, lines of any length, is not read as
// slots.
var servedHeader = padRecord("burstcache served control calls, 64-byte records")

// servedFree is a slot that holds no call.
var servedFree = padRecord("")

// castagnoli is the table of the checksum that ends a call's record.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// padRecord returns s padded with spaces to a record ending in a newline.
func padRecord(s string) []byte {
	return []byte(s + strings.Repeat(" ", servedRecordSize-1-len(s)) + "\n")
}

// encodeServed returns the record of id: "<time, 20 digits> <nonce>\n"
// and "#<checksum of that line, 8 hex digits>\n". A server of an earlier
// release reads its first line as the line it wrote for the call, and
// passes over the other lines of the file.
func encodeServed(id callID) ([]byte, error) {
	rec := fmt.Appendf(make([]byte, 0, servedRecordSize), "%020d %s\n", id.ts, id.nonce)
	rec = fmt.Appendf(rec, "#%08x\n", crc32.Checksum(rec, castagnoli))
	if len(rec) != servedRecordSize {
		return nil, fmt.Errorf("a call of nonce %q does not fit a record", id.nonce)
	}
	return rec, nil
}

// decodeServed reads the record of a slot. A free slot, and one whose
// writing a crash cut short, holds no call.
func decodeServed(rec []byte) (callID, bool) {
	line, sum := rec[:servedRecordSize-10], rec[servedRecordSize-10:]
	if string(sum) != fmt.Sprintf("#%08x\n", crc32.Checksum(line, castagnoli)) {
		return callID{}, false
	}
	ts, err := strconv.ParseInt(string(line[:20]), 10, 64)
	if err != nil || line[20] != ' ' {
		return callID{}, false
	}
	return callID{ts: ts, nonce: string(line[21 : len(line)-1])}, true
}

// slotOffset returns where slot i starts in the file: past the header.
func slotOffset(i int) int64 { return int64(i+1) * servedRecordSize }

// readSlots returns the calls in the slots of data, a zero callID for a
// slot that holds none, and false when data is not of this format. A tail
// shorter than a record, left by a crash while the file grew, is no slot.
func readSlots(data []byte) ([]callID, bool) {
	if !bytes.HasPrefix(data, servedHeader) {
		return nil, false
	}
	slots := make([]callID, len(data)/servedRecordSize-1)
	for i := range slots {
		off := slotOffset(i)
		slots[i], _ = decodeServed(data[off : off+servedRecordSize])
	}
	return slots, true
}

// readLines returns the calls of a file of the earlier format, a line
// "<unix seconds> <nonce>" per call, appended: a torn last line is not a
// call. It reads the first line of each record of this format the same
// way, as servers of the earlier release do.
func readLines(data []byte) []callID {
	var calls []callID
	for line := range strings.SplitSeq(string(data), "\n") {
		ts, nonce, ok := strings.Cut(line, " ")
		n, err := strconv.ParseInt(ts, 10, 64)
		if ok && err == nil && len(nonce) == 32 {
			calls = append(calls, callID{ts: n, nonce: nonce})
		}
	}
	return calls
}

// newServedFile returns the content of a new file of at least slots
// slots, with calls in the first ones. It has 2^k-1 slots, so that with
// its header it fills whole pages and blocks: growing it never shares a
// block with what it held.
func newServedFile(calls []callID, slots int) ([]byte, int, error) {
	n := 1
	for n < slots || n < len(calls) {
		n = 2*n + 1
	}
	buf := bytes.NewBuffer(make([]byte, 0, slotOffset(n)))
	buf.Write(servedHeader)
	for _, id := range calls {
		rec, err := encodeServed(id)
		if err != nil {
			return nil, 0, err
		}
		buf.Write(rec)
	}
	buf.Write(bytes.Repeat(servedFree, n-len(calls)))
	return buf.Bytes(), n, nil
}
