package cacheinstance

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestClipKeepsWhatTheAPIServerTakes cuts messages of every length around
// the limit, of one-byte and of multi-byte characters: the result fits,
// stays valid UTF-8, starts as the message did, and says that it was cut.
func TestClipKeepsWhatTheAPIServerTakes(t *testing.T) {
	for _, unit := range []string{"a", "é", "€", "𝄞"} {
		for n := 1000; n < 1100; n++ {
			msg := strings.Repeat(unit, n/len(unit)+1)[:n/len(unit)*len(unit)]
			got := clip(msg, maxEventNote)
			switch {
			case len(got) > maxEventNote:
				t.Fatalf("clip of %d bytes of %q: %d bytes, want at most %d", len(msg), unit, len(got), maxEventNote)
			case !utf8.ValidString(got):
				t.Fatalf("clip of %d bytes of %q: not valid UTF-8", len(msg), unit)
			case len(msg) <= maxEventNote && got != msg:
				t.Fatalf("clip of %d bytes of %q changed a message that fits", len(msg), unit)
			case len(msg) > maxEventNote && (!strings.HasPrefix(msg, strings.TrimRight(got[:strings.LastIndex(got, " ... (")], " ")) || !strings.HasSuffix(got, " more bytes)")):
				t.Fatalf("clip of %d bytes of %q = ...%q", len(msg), unit, got[len(got)-40:])
			}
		}
	}
}
