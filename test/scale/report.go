package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// report prints the measurements and how they grow from the smallest
// number of instances to the largest, and writes them to -out/scale.md.
func report(c config, rows []row) error {
	var b strings.Builder
	writeTable(&b, c, rows)
	fmt.Print(b.String())
	if c.out == "" {
		return nil
	}
	return os.WriteFile(filepath.Join(c.out, "scale.md"), []byte("```\n"+b.String()+"```\n"), 0o644)
}

func writeTable(w *strings.Builder, c config, rows []row) {
	fmt.Fprintf(w, "%10s %14s %14s %16s %14s\n", "instances", "to Ready (s)", "deleted (s)", "manager CPU (s)", "peak RSS (MiB)")
	for _, r := range rows {
		fmt.Fprintf(w, "%10d %14.1f %14.1f %16.1f %14d\n", r.instances, secs(r.ready), secs(r.deleted), secs(r.cpu), r.peakRSS>>20)
	}
	if len(rows) > 1 {
		lo, hi := rows[0], rows[len(rows)-1]
		k := float64(hi.instances) / float64(lo.instances)
		fmt.Fprintf(w, "\ngrowth from %d to %d instances (%.0fx more; 1.0 per instance means linear):\n", lo.instances, hi.instances, k)
		fmt.Fprintf(w, "  wall time %.2fx, per instance %.2f\n", secs(hi.ready+hi.deleted)/secs(lo.ready+lo.deleted), secs(hi.ready+hi.deleted)/secs(lo.ready+lo.deleted)/k)
		fmt.Fprintf(w, "  manager CPU %.2fx, per instance %.2f\n", secs(hi.cpu)/secs(lo.cpu), secs(hi.cpu)/secs(lo.cpu)/k)
		fmt.Fprintf(w, "  peak memory %.2fx\n", float64(hi.peakRSS)/float64(lo.peakRSS))
	}
	fmt.Fprintf(w, "\n%d kwok nodes, one 1Ti server per instance, %d concurrent creators, one real cache server answering control calls\n", c.nodes, creators)
}

func secs(d time.Duration) float64 { return d.Seconds() }
