package server

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/burstcache/burstcache/cacheserver/control"
)

func TestMetricsText(t *testing.T) {
	var b strings.Builder
	writeMetrics(&b, control.Stats{Server: control.ServerInfo{Instance: `a"b`, Index: 2}, DirtyBytes: 4096, Hits: 7})
	var samples []string
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, "burstcache_dirty_bytes") || strings.HasPrefix(line, "burstcache_hits_total") {
			samples = append(samples, line)
		}
	}
	want := []string{
		`burstcache_dirty_bytes{instance="a\"b",server="2"} 4096`,
		`burstcache_hits_total{instance="a\"b",server="2"} 7`,
	}
	if diff := cmp.Diff(want, samples); diff != "" {
		t.Errorf("samples (-want +got):\n%s", diff)
	}
}
