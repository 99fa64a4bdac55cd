package server

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/burstcache/burstcache/cacheserver/control"
)

// metric is one Prometheus sample taken from the statistics. Names follow
// the Prometheus conventions: base units in the name, _total on counters.
type metric struct {
	name, kind, help string
	value            func(control.Stats) float64
	// present, when set, says whether the sample exists at all.
	present func(control.Stats) bool
}

var metrics = []metric{
	{name: "burstcache_capacity_bytes", kind: "gauge", help: "Cache capacity.", value: func(s control.Stats) float64 { return float64(s.CapacityBytes) }},
	{name: "burstcache_cached_bytes", kind: "gauge", help: "Data the cache holds, clean or dirty.", value: func(s control.Stats) float64 { return float64(s.CachedBytes) }},
	{name: "burstcache_dirty_bytes", kind: "gauge", help: "Data not yet written back.", value: func(s control.Stats) float64 { return float64(s.DirtyBytes) }},
	{name: "burstcache_hits_total", kind: "counter", help: "Extent reads served from the cache.", value: func(s control.Stats) float64 { return float64(s.Hits) }},
	{name: "burstcache_misses_total", kind: "counter", help: "Extent reads copied up from the backing store.", value: func(s control.Stats) float64 { return float64(s.Misses) }},
	{name: "burstcache_read_bytes_total", kind: "counter", help: "Bytes served to clients.", value: func(s control.Stats) float64 { return float64(s.BytesRead) }},
	{name: "burstcache_written_bytes_total", kind: "counter", help: "Bytes accepted from clients.", value: func(s control.Stats) float64 { return float64(s.BytesWritten) }},
	{name: "burstcache_copy_up_bytes_total", kind: "counter", help: "Bytes read from the backing store.", value: func(s control.Stats) float64 { return float64(s.CopyUpBytes) }},
	{name: "burstcache_write_back_bytes_total", kind: "counter", help: "Bytes written back to the backing store.", value: func(s control.Stats) float64 { return float64(s.WriteBackBytes) }},
	{name: "burstcache_write_back_lag_seconds", kind: "gauge", help: "Age of the oldest dirty data.", value: func(s control.Stats) float64 { return s.WriteBackLagSeconds }},
	{name: "burstcache_write_back_errors_total", kind: "counter", help: "Failed write-backs.", value: func(s control.Stats) float64 { return float64(s.WriteBackErrors) }},
	{name: "burstcache_write_back_failing", kind: "gauge", help: "1 while write-back keeps failing, 2 when the backing file system refuses the data (full, over quota, read-only) and writes that need space fail.", value: func(s control.Stats) float64 { return boolValue(s.WriteBackFailing) + boolValue(s.WriteBackRefused) }},
	{name: "burstcache_doomed_files", kind: "gauge", help: "Files whose unlink is under way: their dirty data waits for it to end.", value: func(s control.Stats) float64 { return float64(s.DoomedFiles) }},
	{name: "burstcache_hidden_names", kind: "gauge", help: "Hidden names of files unlinked while open that the server removes at the teardown unless their mount does first.", value: func(s control.Stats) float64 { return float64(s.HiddenNames) }},
	{name: "burstcache_refused_connections_total", kind: "counter", help: "Data-path connections closed because the peer did not prove the shared secret or sent an untagged request.", value: func(s control.Stats) float64 { return float64(s.RefusedConnections) }},
	{name: "burstcache_refused_control_calls_total", kind: "counter", help: "Control calls refused for their signature: unsigned, another secret, replayed, or a clock too far off.", value: func(s control.Stats) float64 { return float64(s.RefusedControlCalls) }},
	{name: "burstcache_replaced_files_total", kind: "counter", help: "Files whose cached data a read dropped because the file it opened had replaced, behind the cache, the one the data came from, or had been changed in place since.", value: func(s control.Stats) float64 { return float64(s.ReplacedFiles) }},
	{name: "burstcache_evictions_total", kind: "counter", help: "Clean extents evicted to make room.", value: func(s control.Stats) float64 { return float64(s.Evictions) }},
	{name: "burstcache_write_window_bytes", kind: "gauge", help: "Bytes written to the cache device within the current write window.", value: func(s control.Stats) float64 { return float64(s.WindowBytesWritten) }},
	{
		name: "burstcache_write_window_limit_bytes", kind: "gauge", help: "Bytes the write window allows; absent when unlimited.",
		value: func(s control.Stats) float64 { return float64(s.WindowLimitBytes) }, present: func(s control.Stats) bool { return s.WindowLimitBytes >= 0 },
	},
	{name: "burstcache_read_only", kind: "gauge", help: "1 when the write window is used up and writes fail with EROFS.", value: func(s control.Stats) float64 { return boolValue(s.ReadOnly) }},
	{name: "burstcache_cache_device_failed", kind: "gauge", help: "1 when an fdatasync of the cache device failed: writes fail with EIO, reads and write-back go on.", value: func(s control.Stats) float64 { return boolValue(s.CacheDeviceError != "") }},
	{name: "burstcache_index_commit_failing", kind: "gauge", help: "1 while commits of the cache index fail (a full cache disk): fsync fails, and so do writes that need freed cache space.", value: func(s control.Stats) float64 { return boolValue(s.IndexError != "") }},
	{name: "burstcache_index_commit_failures_total", kind: "counter", help: "Failed commits of the cache index.", value: func(s control.Stats) float64 { return float64(s.IndexCommitFailures) }},
	{name: "burstcache_files", kind: "gauge", help: "Files with cached data.", value: func(s control.Stats) float64 { return float64(s.Files) }},
	{name: "burstcache_preload_done_bytes", kind: "gauge", help: "Bytes the running preloads have copied up; 0 when none runs.", value: func(s control.Stats) float64 { return float64(s.PreloadBytesDone) }},
	{name: "burstcache_preload_total_bytes", kind: "gauge", help: "Bytes the running preloads copy up in all; 0 when none runs.", value: func(s control.Stats) float64 { return float64(s.PreloadBytesTotal) }},
}

// summary is a Prometheus summary without quantiles: the _sum and _count
// samples, whose rates divide into a mean.
type summary struct {
	name, help string
	sum        func(control.Stats) float64
	count      func(control.Stats) uint64
}

var summaries = []summary{
	{
		name: "burstcache_flush_duration_seconds", help: "Time taken by whole-cache flushes.",
		sum: func(s control.Stats) float64 { return s.FlushSeconds }, count: func(s control.Stats) uint64 { return s.Flushes },
	},
	{
		name: "burstcache_copy_up_duration_seconds", help: "Time taken by copy-ups of extents from the backing store.",
		sum: func(s control.Stats) float64 { return s.CopyUpSeconds }, count: func(s control.Stats) uint64 { return s.CopyUps },
	},
	{
		name: "burstcache_write_back_duration_seconds", help: "Time taken by writes of extents to the backing store.",
		sum: func(s control.Stats) float64 { return s.WriteBackSeconds }, count: func(s control.Stats) uint64 { return s.WriteBacks },
	},
}

// MetricNames returns the name of every sample a server exports, with the
// _sum and _count samples of its summaries, so that dashboards and alerts
// can be checked against what servers really serve.
func MetricNames() []string {
	names := make([]string, 0, len(metrics)+2*len(summaries))
	for _, m := range metrics {
		names = append(names, m.name)
	}
	for _, m := range summaries {
		names = append(names, m.name+"_sum", m.name+"_count")
	}
	return names
}

// serveMetrics writes the statistics in the Prometheus text format.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	st, err := s.Stats(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	writeMetrics(w, st)
}

// writeMetrics writes every sample labelled with the instance, its
// namespace and the server's index, then the summaries.
func writeMetrics(w io.Writer, st control.Stats) {
	labels := metricLabels(st.Server)
	for _, m := range metrics {
		if m.present != nil && !m.present(st) {
			continue
		}
		_, _ = fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s%s %g\n", m.name, m.help, m.name, m.kind, m.name, labels, m.value(st))
	}
	for _, m := range summaries {
		_, _ = fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s summary\n%s_sum%s %g\n%s_count%s %d\n",
			m.name, m.help, m.name, m.name, labels, m.sum(st), m.name, labels, m.count(st))
	}
}

// metricLabels returns the label set of a server's samples. The operator
// names instances "namespace/name/uid"; a server started by hand may use
// any name (such as "local:/path/of/backing"), which becomes the instance
// label whole, with an empty namespace.
func metricLabels(info control.ServerInfo) string {
	ns, name := "", info.Instance
	if parts := strings.Split(info.Instance, "/"); len(parts) == 3 && parts[0] != "" && parts[1] != "" && !strings.Contains(parts[0], ":") {
		ns, name = parts[0], parts[1]
	}
	return fmt.Sprintf("{namespace=%s,instance=%s,server=\"%d\"}", labelValue(ns), labelValue(name), info.Index)
}

// labelValue quotes s as the text format takes a label value: UTF-8, with
// only backslash, double quote and newline escaped. Go's quoting escapes
// more (a tab, bytes that are not UTF-8 from a backing path), which a
// scraper refuses, and the whole scrape with it; bytes that are not UTF-8
// become U+FFFD, as no label can hold them.
func labelValue(s string) string {
	return `"` + labelEscaper.Replace(strings.ToValidUTF8(s, "\uFFFD")) + `"`
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
