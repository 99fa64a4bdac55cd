package server

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/burstcache/burstcache/cacheserver/control"
)

func TestMetricsText(t *testing.T) {
	tests := map[string]struct {
		stats control.Stats
		want  []string
	}{
		"operator names the instance ns/name/uid": {
			stats: control.Stats{Server: control.ServerInfo{Instance: "team/run-1/0a1b", Index: 2}, DirtyBytes: 4096, Hits: 7, WindowLimitBytes: -1},
			want: []string{
				`burstcache_dirty_bytes{namespace="team",instance="run-1",server="2"} 4096`,
				`burstcache_hits_total{namespace="team",instance="run-1",server="2"} 7`,
				`burstcache_write_window_bytes{namespace="team",instance="run-1",server="2"} 0`,
				`burstcache_flush_duration_seconds_sum{namespace="team",instance="run-1",server="2"} 0`,
				`burstcache_flush_duration_seconds_count{namespace="team",instance="run-1",server="2"} 0`,
				`burstcache_copy_up_duration_seconds_sum{namespace="team",instance="run-1",server="2"} 0`,
				`burstcache_copy_up_duration_seconds_count{namespace="team",instance="run-1",server="2"} 0`,
				`burstcache_write_back_duration_seconds_sum{namespace="team",instance="run-1",server="2"} 0`,
				`burstcache_write_back_duration_seconds_count{namespace="team",instance="run-1",server="2"} 0`,
			},
		},
		"a local instance named after its backing path": {
			stats: control.Stats{Server: control.ServerInfo{Instance: "local:/a/b"}, DirtyBytes: 1},
			want: []string{
				`burstcache_dirty_bytes{namespace="",instance="local:/a/b",server="0"} 1`,
				`burstcache_hits_total{namespace="",instance="local:/a/b",server="0"} 0`,
				`burstcache_write_window_bytes{namespace="",instance="local:/a/b",server="0"} 0`,
				`burstcache_write_window_limit_bytes{namespace="",instance="local:/a/b",server="0"} 0`,
				`burstcache_flush_duration_seconds_sum{namespace="",instance="local:/a/b",server="0"} 0`,
				`burstcache_flush_duration_seconds_count{namespace="",instance="local:/a/b",server="0"} 0`,
				`burstcache_copy_up_duration_seconds_sum{namespace="",instance="local:/a/b",server="0"} 0`,
				`burstcache_copy_up_duration_seconds_count{namespace="",instance="local:/a/b",server="0"} 0`,
				`burstcache_write_back_duration_seconds_sum{namespace="",instance="local:/a/b",server="0"} 0`,
				`burstcache_write_back_duration_seconds_count{namespace="",instance="local:/a/b",server="0"} 0`,
			},
		},
		"a hand-started server with a quoted name and a window": {
			stats: control.Stats{Server: control.ServerInfo{Instance: `a"b`}, WindowBytesWritten: 10, WindowLimitBytes: 100, Flushes: 3, FlushSeconds: 1.5,
				CopyUps: 4, CopyUpSeconds: 0.25, WriteBacks: 2, WriteBackSeconds: 0.5},
			want: []string{
				`burstcache_dirty_bytes{namespace="",instance="a\"b",server="0"} 0`,
				`burstcache_hits_total{namespace="",instance="a\"b",server="0"} 0`,
				`burstcache_write_window_bytes{namespace="",instance="a\"b",server="0"} 10`,
				`burstcache_write_window_limit_bytes{namespace="",instance="a\"b",server="0"} 100`,
				`burstcache_flush_duration_seconds_sum{namespace="",instance="a\"b",server="0"} 1.5`,
				`burstcache_flush_duration_seconds_count{namespace="",instance="a\"b",server="0"} 3`,
				`burstcache_copy_up_duration_seconds_sum{namespace="",instance="a\"b",server="0"} 0.25`,
				`burstcache_copy_up_duration_seconds_count{namespace="",instance="a\"b",server="0"} 4`,
				`burstcache_write_back_duration_seconds_sum{namespace="",instance="a\"b",server="0"} 0.5`,
				`burstcache_write_back_duration_seconds_count{namespace="",instance="a\"b",server="0"} 2`,
			},
		},
		"a local instance of a backing path of any name": {
			stats: control.Stats{Server: control.ServerInfo{Instance: "local:/a\tb\xe9\"c\\d\ne"}},
			want: []string{
				"burstcache_dirty_bytes{namespace=\"\",instance=\"local:/a\tb\uFFFD\\\"c\\\\d\\ne\",server=\"0\"} 0",
				"burstcache_hits_total{namespace=\"\",instance=\"local:/a\tb\uFFFD\\\"c\\\\d\\ne\",server=\"0\"} 0",
				"burstcache_write_window_bytes{namespace=\"\",instance=\"local:/a\tb\uFFFD\\\"c\\\\d\\ne\",server=\"0\"} 0",
				"burstcache_write_window_limit_bytes{namespace=\"\",instance=\"local:/a\tb\uFFFD\\\"c\\\\d\\ne\",server=\"0\"} 0",
				"burstcache_flush_duration_seconds_sum{namespace=\"\",instance=\"local:/a\tb\uFFFD\\\"c\\\\d\\ne\",server=\"0\"} 0",
				"burstcache_flush_duration_seconds_count{namespace=\"\",instance=\"local:/a\tb\uFFFD\\\"c\\\\d\\ne\",server=\"0\"} 0",
				"burstcache_copy_up_duration_seconds_sum{namespace=\"\",instance=\"local:/a\tb\uFFFD\\\"c\\\\d\\ne\",server=\"0\"} 0",
				"burstcache_copy_up_duration_seconds_count{namespace=\"\",instance=\"local:/a\tb\uFFFD\\\"c\\\\d\\ne\",server=\"0\"} 0",
				"burstcache_write_back_duration_seconds_sum{namespace=\"\",instance=\"local:/a\tb\uFFFD\\\"c\\\\d\\ne\",server=\"0\"} 0",
				"burstcache_write_back_duration_seconds_count{namespace=\"\",instance=\"local:/a\tb\uFFFD\\\"c\\\\d\\ne\",server=\"0\"} 0",
			},
		},
	}
	keep := []string{"burstcache_dirty_bytes{", "burstcache_hits_total{", "burstcache_write_window", "burstcache_flush_duration_seconds_",
		"burstcache_copy_up_duration_seconds_", "burstcache_write_back_duration_seconds_"}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			writeMetrics(&b, tc.stats)
			var samples []string
			for _, line := range strings.Split(b.String(), "\n") {
				for _, k := range keep {
					if strings.HasPrefix(line, k) {
						samples = append(samples, line)
						break
					}
				}
			}
			if diff := cmp.Diff(tc.want, samples); diff != "" {
				t.Errorf("samples (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMetricNamesAreServed holds MetricNames to the samples writeMetrics
// really writes, so that a metric added or renamed in one place and not the
// other fails here.
func TestMetricNamesAreServed(t *testing.T) {
	var b strings.Builder
	writeMetrics(&b, control.Stats{Server: control.ServerInfo{Instance: "team/run-1/0a1b"}, WindowLimitBytes: 100})
	var served []string
	for _, line := range strings.Split(b.String(), "\n") {
		if name, _, ok := strings.Cut(line, "{"); ok && !strings.HasPrefix(line, "#") {
			served = append(served, name)
		}
	}
	if diff := cmp.Diff(served, MetricNames()); diff != "" {
		t.Errorf("MetricNames differs from the samples served (-served +names):\n%s", diff)
	}
}
