package monitoring

import (
	"fmt"
	"slices"
	"testing"
)

// TestDashboardAndAlertsUseExportedMetrics holds every expression of the
// dashboard and of the documented alerts to the metrics burstcache exports.
func TestDashboardAndAlertsUseExportedMetrics(t *testing.T) {
	exported := exportedNames(t)
	for name, tc := range map[string]struct {
		srcs     []source
		wantMost int // at least this many expressions, so an unread file fails
	}{
		"dashboard":             {srcs: dashboardExprs(t), wantMost: 20},
		"alerts shown in docs/": {srcs: docAlerts(t), wantMost: 4},
	} {
		t.Run(name, func(t *testing.T) {
			if len(tc.srcs) < tc.wantMost {
				t.Fatalf("%d expressions, want at least %d", len(tc.srcs), tc.wantMost)
			}
			missing, err := unknown(tc.srcs, exported)
			if err != nil {
				t.Fatal(err)
			}
			for where, names := range missing {
				t.Errorf("%s uses %v, which burstcache does not export", where, names)
			}
		})
	}
}

// TestUnknownNoticesARenamedMetric proves the check above can fail: with
// one metric taken out of the exported set, as a rename would, every
// expression using it is reported.
func TestUnknownNoticesARenamedMetric(t *testing.T) {
	exported := exportedNames(t)
	const renamed = "burstcache_dirty_bytes"
	if !exported[renamed] {
		t.Fatalf("%s is not exported", renamed)
	}
	delete(exported, renamed)
	for name, srcs := range map[string][]source{"dashboard": dashboardExprs(t), "alerts": docAlerts(t)} {
		missing, err := unknown(srcs, exported)
		if err != nil {
			t.Fatal(err)
		}
		if len(missing) == 0 {
			t.Errorf("%s: no expression reported without %s", name, renamed)
		}
		for where, names := range missing {
			if !slices.Equal(names, []string{renamed}) {
				t.Errorf("%s: %s reported %v, want only %s", name, where, names, renamed)
			}
		}
	}
}

// unknown returns, by where they are used, the metric names of srcs that
// exported lacks. An expression without a metric checks nothing, so it is
// an error.
func unknown(srcs []source, exported map[string]bool) (map[string][]string, error) {
	missing := map[string][]string{}
	for _, s := range srcs {
		names, err := MetricNames(s.expr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.where, err)
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("%s: %q uses no metric", s.where, s.expr)
		}
		for _, n := range names {
			if !exported[n] && !slices.Contains(missing[s.where], n) {
				missing[s.where] = append(missing[s.where], n)
			}
		}
	}
	return missing, nil
}
