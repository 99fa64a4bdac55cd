package ident

import (
	"fmt"
	"strconv"
	"strings"
)

// Range is an inclusive range of user or group ids.
type Range struct{ Min, Max uint32 }

// Ranges is a set of ids, as ranges. An empty Ranges holds no id.
type Ranges []Range

// Contains reports whether id lies in one of the ranges.
func (rs Ranges) Contains(id uint32) bool {
	for _, r := range rs {
		if id >= r.Min && id <= r.Max {
			return true
		}
	}
	return false
}

// String formats rs as ParseRanges reads it: 0,1000-1999.
func (rs Ranges) String() string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = strconv.FormatUint(uint64(r.Min), 10)
		if r.Max != r.Min {
			parts[i] += "-" + strconv.FormatUint(uint64(r.Max), 10)
		}
	}
	return strings.Join(parts, ",")
}

// ParseRanges reads comma-separated ids and inclusive ranges of ids, such
// as 0,1000-1999.
func ParseRanges(s string) (Ranges, error) {
	var rs Ranges
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		if !isRange {
			hi = lo
		}
		first, err := strconv.ParseUint(lo, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("id range %q: %w", part, err)
		}
		last, err := strconv.ParseUint(hi, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("id range %q: %w", part, err)
		}
		if first > last {
			return nil, fmt.Errorf("id range %q: the first id is above the last", part)
		}
		rs = append(rs, Range{Min: uint32(first), Max: uint32(last)})
	}
	return rs, nil
}
