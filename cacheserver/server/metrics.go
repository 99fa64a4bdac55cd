package server

import (
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/burstcache/burstcache/cacheserver/control"
)

// metric is one Prometheus sample taken from the statistics.
type metric struct {
	name, kind, help string
	value            func(control.Stats) float64
}

var metrics = []metric{
	{"burstcache_capacity_bytes", "gauge", "Cache capacity.", func(s control.Stats) float64 { return float64(s.CapacityBytes) }},
	{"burstcache_cached_bytes", "gauge", "Data the cache holds, clean or dirty.", func(s control.Stats) float64 { return float64(s.CachedBytes) }},
	{"burstcache_dirty_bytes", "gauge", "Data not yet written back.", func(s control.Stats) float64 { return float64(s.DirtyBytes) }},
	{"burstcache_hits_total", "counter", "Extent reads served from the cache.", func(s control.Stats) float64 { return float64(s.Hits) }},
	{"burstcache_misses_total", "counter", "Extent reads copied up from the backing store.", func(s control.Stats) float64 { return float64(s.Misses) }},
	{"burstcache_copy_up_bytes_total", "counter", "Bytes read from the backing store.", func(s control.Stats) float64 { return float64(s.CopyUpBytes) }},
	{"burstcache_write_back_bytes_total", "counter", "Bytes written back to the backing store.", func(s control.Stats) float64 { return float64(s.WriteBackBytes) }},
	{"burstcache_write_back_lag_seconds", "gauge", "Age of the oldest dirty data.", func(s control.Stats) float64 { return s.WriteBackLagSeconds }},
	{"burstcache_write_back_errors_total", "counter", "Failed write-backs.", func(s control.Stats) float64 { return float64(s.WriteBackErrors) }},
	{"burstcache_files", "gauge", "Files with cached data.", func(s control.Stats) float64 { return float64(s.Files) }},
}

// serveMetrics writes the statistics in the Prometheus text format, each
// sample labelled with the instance and the server's index.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	st, err := s.Stats(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	writeMetrics(w, st)
}

func writeMetrics(w io.Writer, st control.Stats) {
	labels := fmt.Sprintf("{instance=%s,server=\"%d\"}", strconv.Quote(st.Server.Instance), st.Server.Index)
	for _, m := range metrics {
		_, _ = fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s%s %g\n", m.name, m.help, m.name, m.kind, m.name, labels, m.value(st))
	}
}
