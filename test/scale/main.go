package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

type config struct {
	bin, kwok, kwokStages, out, assets string
	nodes                              int
	sizes                              []int
}

func main() {
	if os.Getenv(managerEnv) != "" {
		if err := runManagerChild(); err != nil {
			log.Fatalf("scale manager: %v", err)
		}
		return
	}
	var c config
	var sizes string
	flag.StringVar(&c.bin, "burstcache", "bin/burstcache", "burstcache binary")
	flag.StringVar(&c.kwok, "kwok", "bin/kwok", "kwok binary")
	flag.StringVar(&c.kwokStages, "kwok-stages", "", "directory of kwok's stage YAMLs (default: from the kwok module in the Go module cache)")
	flag.StringVar(&c.assets, "assets", os.Getenv("KUBEBUILDER_ASSETS"), "directory of kube-apiserver and etcd (default $KUBEBUILDER_ASSETS, then bin/k8s)")
	flag.StringVar(&c.out, "out", "", "directory for scale.md (none: stdout only)")
	flag.IntVar(&c.nodes, "nodes", 500, "simulated SSD nodes")
	flag.StringVar(&sizes, "sizes", "100,1000", "numbers of instances, comma-separated, each measured in turn")
	flag.Parse()
	log.SetFlags(log.Ltime)
	var err error
	if c.sizes, err = parseSizes(sizes); err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err = run(ctx, c)
	stop()
	if err != nil {
		log.Fatalf("scale: %v", err)
	}
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-sizes: %q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func run(ctx context.Context, c config) error {
	cl, err := startCluster(ctx, c)
	if err != nil {
		return err
	}
	defer cl.stop()
	var rows []row
	for _, n := range c.sizes {
		log.Printf("Measuring %d instances", n)
		r, err := measure(ctx, cl, n)
		if err != nil {
			cl.dumpLogs()
			return fmt.Errorf("%d instances: %w", n, err)
		}
		rows = append(rows, r)
	}
	return report(c, rows)
}
