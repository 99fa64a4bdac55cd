package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
)

// ratio describes one target figure: num / den for the workloads where both
// were measured.
type ratio struct {
	name     string
	num, den string
	target   float64
}

var ratios = []ratio{
	{"warm / passthrough", colWarm, colPassthrough, 1.0},
	{"warm / FUSE", colWarm, colFUSE, 1.0},
	{"during write-back / warm", colWriteBack, colWarm, 0.7},
	{"cached / slow backing", colSlowCached, colSlow, 10},
	{"cold over slow / slow backing", colSlowCold, colSlow, 1},
}

func cell(v float64, ok bool) string {
	if !ok {
		return "-"
	}
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// report prints the rates and the ratios as aligned tables.
func report(w io.Writer, c config, runs []results) error {
	res := medians(runs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	_, _ = fmt.Fprintf(tw, "workload\tunit\t%s\t\n", strings.Join(columns, "\t"))
	for _, wl := range workloads {
		row := []string{wl.name, wl.unit}
		for _, col := range columns {
			v, ok := res[wl.name][col]
			row = append(row, cell(v, ok))
		}
		_, _ = fmt.Fprintf(tw, "%s\t\n", strings.Join(row, "\t"))
	}
	_, _ = fmt.Fprintln(tw)
	names := []string{"workload"}
	for _, r := range ratios {
		names = append(names, fmt.Sprintf("%s (target %.1fx)", r.name, r.target))
	}
	_, _ = fmt.Fprintf(tw, "%s\t\n", strings.Join(names, "\t"))
	for _, wl := range workloads {
		row := []string{wl.name}
		for _, r := range ratios {
			row = append(row, ratioCell(runs, wl.name, r))
		}
		_, _ = fmt.Fprintf(tw, "%s\t\n", strings.Join(row, "\t"))
	}
	_, _ = fmt.Fprintf(tw, "\n%d processes, %d MiB each, %d KiB blocks, %d servers, slow backing +%s per operation; medians of %d runs (ratios: of each run's own ratio)\n",
		c.p.procs, c.p.fileSize>>20, c.p.blockSize>>10, c.servers, c.delay, len(runs))
	return tw.Flush()
}

// ratioCell is the median over runs of the ratio each run measured: the
// baseline and burstcache of one run ran on the same machine minutes
// apart, so their ratio is steadier than the ratio of medians.
func ratioCell(runs []results, w string, r ratio) string {
	var rs []float64
	for _, res := range runs {
		num, ok1 := res[w][r.num]
		den, ok2 := res[w][r.den]
		if ok1 && ok2 && den != 0 {
			rs = append(rs, num/den)
		}
	}
	if len(rs) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", median(rs))
}

// medians returns, cell by cell, the median of the runs.
func medians(runs []results) results {
	out := results{}
	for _, wl := range workloads {
		for _, col := range columns {
			var vs []float64
			for _, res := range runs {
				if v, ok := res[wl.name][col]; ok {
					vs = append(vs, v)
				}
			}
			if len(vs) > 0 {
				out.set(wl.name, col, median(vs))
			}
		}
	}
	return out
}

func median(vs []float64) float64 {
	vs = slices.Clone(vs)
	slices.Sort(vs)
	if n := len(vs); n%2 == 0 {
		return (vs[n/2-1] + vs[n/2]) / 2
	}
	return vs[len(vs)/2]
}

// writeReport writes results.md (the tables) and results.svg (a plot of the
// data workloads) into c.out.
func writeReport(c config, runs []results) error {
	res := medians(runs)
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	var md strings.Builder
	md.WriteString("```\n")
	if err := report(&md, c, runs); err != nil {
		return err
	}
	md.WriteString("```\n")
	if err := os.WriteFile(filepath.Join(c.out, "results.md"), []byte(md.String()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.out, "results.svg"), []byte(plot(res)), 0o644)
}

// plot draws grouped horizontal bars of MB/s per data workload, one bar per
// column, on a log scale so the slow backing store and the cache fit on one
// chart.
func plot(res results) string {
	const (
		left, barH, gap, width = 230, 9, 14, 520
	)
	colors := map[string]string{
		colRaw: "#888888", colPassthrough: "#bbbbbb", colFUSE: "#dddddd",
		colCold: "#9ecae1", colWarm: "#3182bd", colWriteBack: "#08519c", colClientCache: "#6a51a3",
		colSlow: "#fdd0a2", colSlowCold: "#fd8d3c", colSlowCached: "#d94801",
	}
	var data []workload
	for _, w := range workloads {
		if w.unit == "MB/s" {
			data = append(data, w)
		}
	}
	maxV := 1.0
	for _, w := range data {
		for _, v := range res[w.name] {
			maxV = math.Max(maxV, v)
		}
	}
	scale := func(v float64) float64 {
		if v <= 1 {
			return 0
		}
		return width * math.Log10(v) / math.Log10(maxV)
	}
	groupH := len(columns)*barH + gap
	height := len(data)*groupH + 40 + len(columns)*14
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", left+width+80, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	for i, w := range data {
		y := 20 + i*groupH
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-8, y+groupH/2, w.name)
		for j, col := range columns {
			v, ok := res[w.name][col]
			if !ok {
				continue
			}
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", left, y+j*barH, scale(v), barH-1, colors[col])
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="8">%s</text>`+"\n", float64(left)+scale(v)+3, y+j*barH+8, cell(v, true))
		}
	}
	ly := 20 + len(data)*groupH + 10
	for j, col := range columns {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", left, ly+j*14, colors[col], left+14, ly+j*14+9, col)
	}
	fmt.Fprintf(&b, `<text x="%d" y="12">MB/s, log scale</text>`+"\n</svg>\n", left)
	return b.String()
}
