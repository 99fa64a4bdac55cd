package ident

import (
	"slices"
	"testing"
)

func TestParseRanges(t *testing.T) {
	rs, err := ParseRanges("0, 1000-1999,4294967294")
	if err != nil {
		t.Fatal(err)
	}
	want := Ranges{{0, 0}, {1000, 1999}, {4294967294, 4294967294}}
	if !slices.Equal(rs, want) {
		t.Fatalf("ParseRanges = %v, want %v", rs, want)
	}
	if s := rs.String(); s != "0,1000-1999,4294967294" {
		t.Errorf("String() = %q", s)
	}
	for id, in := range map[uint32]bool{0: true, 1: false, 999: false, 1000: true, 1999: true, 2000: false, 4294967294: true, 4294967295: false} {
		if rs.Contains(id) != in {
			t.Errorf("Contains(%d) = %v, want %v", id, !in, in)
		}
	}
	for _, bad := range []string{"", "1-", "-1", "5-4", "x", "1,,2", "4294967296"} {
		if _, err := ParseRanges(bad); err == nil {
			t.Errorf("ParseRanges(%q) took it", bad)
		}
	}
}
