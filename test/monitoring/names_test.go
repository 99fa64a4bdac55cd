package monitoring

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMetricNames(t *testing.T) {
	for name, tc := range map[string]struct {
		expr    string
		want    []string
		wantErr error
	}{
		"a bare metric": {expr: "up", want: []string{"up"}},
		"matchers are label names and strings, not metrics": {
			expr: `burstcache_dirty_bytes{namespace="$namespace",instance=~"a|b"}`, want: []string{"burstcache_dirty_bytes"},
		},
		"functions, ranges and Grafana's interval": {
			expr: `sum(rate(burstcache_hits_total{instance="x"}[$__rate_interval])) / sum(rate(burstcache_misses_total[5m:1m] offset 1h))`,
			want: []string{"burstcache_hits_total", "burstcache_misses_total"},
		},
		"grouping lists before and after the argument": {
			expr: `histogram_quantile(0.9, sum by (le, kind) (rate(m_bucket[5m]))) + on (namespace) group_left(phase) sum(n) without (server)`,
			want: []string{"m_bucket", "n"},
		},
		"keywords, numbers and a repeated metric": {
			expr: `count(up == 0) or vector(0) and up > bool 1e3 unless absent(up) atan2 -Inf + SUM BY (x) (NaN)`,
			want: []string{"up"},
		},
		"strings may hold brackets and quotes": {
			expr: `label_replace(a, "dst", "}{'\"", "src", "(.*)") * b{l='it\'s'} * c{l=` + "`x\\`" + `}`,
			want: []string{"a", "b", "c"},
		},
		"colons in recording rule names":           {expr: "job:burstcache_dirty_bytes:sum", want: []string{"job:burstcache_dirty_bytes:sum"}},
		"a selector by __name__ cannot be checked": {expr: `{__name__="burstcache_dirty_bytes"}`, wantErr: ErrNoMetricName},
		"a selector after an aggregation":          {expr: `sum by (a) ({a="b"})`, wantErr: ErrNoMetricName},
		"an unclosed bracket":                      {expr: `sum(rate(x[5m])`, wantErr: ErrUnbalanced},
		"a stray closing bracket":                  {expr: `x{a="b"}]`, wantErr: ErrUnbalanced},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := MetricNames(tc.expr)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMetricNamesRefusesAnUnterminatedString(t *testing.T) {
	if names, err := MetricNames(`x{a="b}`); err == nil {
		t.Errorf("MetricNames = %v, want an error", names)
	}
}
