package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/burstcache/burstcache/test/docs"
)

const (
	dashboardPath = "../../config/monitoring/grafana-dashboard.json"
	docsDir       = "../../docs"
)

// source is one PromQL expression and where it was found.
type source struct{ where, expr string }

// panel is the part of a Grafana panel that holds queries; rows hold
// panels of their own when collapsed.
type panel struct {
	Title   string
	Type    string
	Targets []struct{ Expr string }
	Panels  []panel
}

// dashboardExprs returns the expressions of every panel and query variable
// of the dashboard. A panel without a query would show nothing, so it is an
// error.
func dashboardExprs(t *testing.T) []source {
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels     []panel
		Templating struct{ List []grafanaVar }
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("reading the dashboard: %v", err)
	}
	srcs := panelExprs(t, dash.Panels)
	for _, v := range dash.Templating.List {
		if e := v.expr(); e != "" {
			srcs = append(srcs, source{"variable " + v.Name, e})
		}
	}
	return srcs
}

func panelExprs(t *testing.T, panels []panel) []source {
	var srcs []source
	for _, p := range panels {
		if p.Type == "row" {
			srcs = append(srcs, panelExprs(t, p.Panels)...)
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			srcs = append(srcs, source{"panel " + p.Title, tg.Expr})
		}
	}
	return srcs
}

// variable is a Grafana template variable; a query variable's query is a
// string or, in newer dashboards, an object holding it.
type grafanaVar struct {
	Name, Type string
	Query      json.RawMessage
}

// labelValues is Grafana's label_values(selector, label).
var labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*\w+\s*\)\s*$`)

// expr returns the PromQL of a query variable, or "".
func (v grafanaVar) expr() string {
	if v.Type != "query" {
		return ""
	}
	var q struct{ Query string }
	if json.Unmarshal(v.Query, &q.Query) != nil {
		_ = json.Unmarshal(v.Query, &q)
	}
	if m := labelValues.FindStringSubmatch(q.Query); m != nil {
		return m[1]
	}
	return q.Query
}

// docAlerts returns the alerts of the PrometheusRules shown in docs/.
func docAlerts(t *testing.T) []source {
	examples, err := docs.Examples(docsDir)
	if err != nil {
		t.Fatal(err)
	}
	var srcs []source
	for _, ex := range examples {
		if ex.Object.GetKind() != "PrometheusRule" {
			continue
		}
		groups, _, _ := unstructured.NestedSlice(ex.Object.Object, "spec", "groups")
		for _, g := range groups {
			rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
			for _, r := range rules {
				rule := r.(map[string]any)
				srcs = append(srcs, source{fmt.Sprintf("%s: alert %v", ex.Source, rule["alert"]), fmt.Sprint(rule["expr"])})
			}
		}
	}
	return srcs
}
