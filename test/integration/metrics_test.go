package integration

import (
	"bufio"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// scrapeMetrics reads a server's /metrics and returns each sample's value
// by metric name; it fails the test unless every sample carries the
// instance and namespace labels and every counter ends in _total.
func scrapeMetrics(t *testing.T, control, wantInstance string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + control + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	samples := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) == 4 && f[1] == "TYPE" && f[3] == "counter" && !strings.HasSuffix(f[2], "_total") {
			t.Errorf("counter %s does not end in _total", f[2])
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, ok := strings.Cut(line, "{")
		labels, value, ok2 := strings.Cut(rest, "} ")
		if !ok || !ok2 {
			t.Fatalf("malformed sample %q", line)
		}
		if !strings.Contains(labels, `namespace=""`) || !strings.Contains(labels, `instance=`+strconv.Quote(wantInstance)) {
			t.Errorf("sample %q lacks the namespace and instance labels", line)
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("sample %q: %v", line, err)
		}
		samples[name] = v
	}
	return samples
}

// TestMetricsMoveWithReadsWritesAndFlushes reads, writes and flushes
// through a real mount and checks that the server's metrics say so.
func TestMetricsMoveWithReadsWritesAndFlushes(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	input := randomBytes(2<<20, 7)
	if err := os.WriteFile(filepath.Join(in.backing, "input.bin"), input, 0o644); err != nil {
		t.Fatal(err)
	}
	up(t, in, 1)
	ctl := readState(t, in.cacheDir).Servers[0].Control
	instance := "local:" + in.backing
	before := scrapeMetrics(t, ctl, instance)
	moved := func(now map[string]float64, name string) float64 { return now[name] - before[name] }

	got, err := os.ReadFile(filepath.Join(in.mount, "input.bin"))
	if err != nil || len(got) != len(input) {
		t.Fatalf("reading input.bin: %d bytes, %v", len(got), err)
	}
	out := randomBytes(3<<20, 9)
	writeSynced(t, filepath.Join(in.mount, "out.bin"), out)

	now := scrapeMetrics(t, ctl, instance)
	atLeast(t, "misses", moved(now, "burstcache_misses_total"), 1)
	atLeast(t, "bytes read", moved(now, "burstcache_read_bytes_total"), float64(len(input)))
	atLeast(t, "copy-up bytes", moved(now, "burstcache_copy_up_bytes_total"), float64(len(input)))
	atLeast(t, "bytes written", moved(now, "burstcache_written_bytes_total"), float64(len(out)))
	atLeast(t, "write-window bytes", now["burstcache_write_window_bytes"], float64(len(out)))
	atLeast(t, "dirty bytes", now["burstcache_dirty_bytes"], float64(len(out)))
	atLeast(t, "cached bytes", now["burstcache_cached_bytes"], float64(len(out)+len(input)))

	if code, body := post(t, in, ctl, "flush"); code != http.StatusOK {
		t.Fatalf("flush: HTTP %d: %s", code, body)
	}
	now = scrapeMetrics(t, ctl, instance)
	if d := now["burstcache_dirty_bytes"]; d != 0 {
		t.Errorf("dirty bytes after a flush = %g, want 0", d)
	}
	atLeast(t, "write-back bytes", moved(now, "burstcache_write_back_bytes_total"), float64(len(out)))
	if n := moved(now, "burstcache_flush_duration_seconds_count"); n != 1 {
		t.Errorf("flushes counted = %g, want 1", n)
	}
	sameFile(t, filepath.Join(in.backing, "out.bin"), out)
}

func atLeast(t *testing.T, what string, got, want float64) {
	t.Helper()
	if got < want {
		t.Errorf("%s moved by %g, want at least %g", what, got, want)
	}
}
