package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// table is what a listing command prints: rows for people, and the value
// that -o json|yaml prints instead.
type table struct {
	header []string
	rows   [][]string
	value  any
}

// print writes t as -o asks.
func (e *env) print(t table) error {
	switch e.output {
	case "":
		return writeTable(e.out, t)
	case "json":
		b, err := json.MarshalIndent(t.value, "", "  ")
		if err != nil {
			return fmt.Errorf("encoding JSON: %w", err)
		}
		_, err = fmt.Fprintf(e.out, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(t.value)
		if err != nil {
			return fmt.Errorf("encoding YAML: %w", err)
		}
		_, err = e.out.Write(b)
		return err
	}
	return fmt.Errorf("unknown output format %q: want json or yaml", e.output)
}

func writeTable(out io.Writer, t table) error {
	if len(t.rows) == 0 {
		_, err := fmt.Fprintln(out, "No resources found.")
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	_, _ = fmt.Fprintln(tw, strings.Join(t.header, "\t"))
	for _, r := range t.rows {
		_, _ = fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// quantity prints a quantity, "-" when unknown.
func quantity(q *resource.Quantity) string {
	if q == nil {
		return "-"
	}
	return q.String()
}

// bytes prints a byte count the way quantities print.
func bytes(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
