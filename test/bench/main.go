package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Columns of the result table, in the order they are printed.
const (
	colRaw         = "raw"
	colPassthrough = "passthrough"
	colFUSE        = "FUSE"
	colCold        = "burstcache cold"
	colWarm        = "burstcache warm"
	colWriteBack   = "during write-back"
	colClientCache = "warm, client cache"
	colSlow        = "slow backing"
	colSlowCold    = "cold over slow"
	colSlowCached  = "burstcache over slow"
)

var columns = []string{colRaw, colPassthrough, colFUSE, colCold, colWarm, colWriteBack, colClientCache, colSlow, colSlowCold, colSlowCached}

// results maps workload name and column to a rate.
type results map[string]map[string]float64

func (r results) set(w, col string, v float64) {
	if r[w] == nil {
		r[w] = map[string]float64{}
	}
	r[w][col] = v
}

type config struct {
	work     string
	bin      string
	out      string
	delay    time.Duration
	servers  int
	capacity string
	ballast  int64
	repeat   int
	p        params
}

func main() {
	var c config
	flag.StringVar(&c.work, "work", "/var/tmp/burstcache-bench", "scratch directory on the disk under test")
	flag.StringVar(&c.bin, "burstcache", "bin/burstcache", "burstcache binary")
	flag.StringVar(&c.out, "out", "", "directory for results.md and results.svg (none: stdout only)")
	flag.DurationVar(&c.delay, "delay", time.Millisecond, "latency the slow backing store adds to every operation")
	flag.IntVar(&c.servers, "servers", 2, "cache servers")
	flag.StringVar(&c.capacity, "capacity", "2Gi", "cache capacity")
	flag.Int64Var(&c.ballast, "ballast", 256<<20, "dirty bytes being written back during the write-back column")
	flag.IntVar(&c.p.procs, "procs", 2, "concurrent processes (goroutines with their own files)")
	flag.Int64Var(&c.p.fileSize, "size", 256<<20, "bytes per process")
	flag.IntVar(&c.p.blockSize, "block", 1<<20, "sequential transfer size")
	flag.IntVar(&c.p.randOps, "randops", 20000, "operations of each random workload")
	flag.IntVar(&c.p.metaFiles, "files", 2000, "files of each metadata workload")
	flag.IntVar(&c.repeat, "repeat", 3, "runs of the whole measurement; the report gives medians")
	only := flag.String("only", "", "measure only the workloads whose names match this regular expression")
	flag.Parse()
	log.SetFlags(0)
	match := regexp.MustCompile(*only).MatchString
	workloads = slices.DeleteFunc(workloads, func(w workload) bool { return !match(w.name) })

	if err := bench(c); err != nil {
		log.Fatalf("bench: %v", err)
	}
}

func bench(c config) error {
	restore, err := raisePipeSize()
	if err != nil {
		return err
	}
	defer restore()
	defer backMemory()()
	var runs []results
	for i := range max(c.repeat, 1) {
		log.Printf("Run %d of %d", i+1, max(c.repeat, 1))
		res, err := run(c)
		if err != nil {
			return err
		}
		runs = append(runs, res)
	}
	err = report(os.Stdout, c, runs)
	if err == nil && c.out != "" {
		err = writeReport(c, runs)
	}
	return err
}

func run(c config) (results, error) {
	if !dropCaches() {
		log.Print("cannot drop the page cache (not root?): reads may come from memory")
	}
	if err := os.RemoveAll(c.work); err != nil {
		return nil, err
	}
	res := results{}
	steps := []struct {
		name string
		fn   func(config, results) error
	}{
		{"raw directory", runRaw},
		{"FUSE passthrough", runPassthrough},
		{"FUSE without passthrough", runFUSE},
		{"burstcache", runCache},
		{"burstcache with the client cache", runClientCache},
		{"slow backing", runSlow},
	}
	for _, s := range steps {
		log.Printf("Measuring %s", s.name)
		if err := s.fn(c, res); err != nil {
			return res, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return res, os.RemoveAll(c.work)
}

// measure runs every workload in a fresh directory under root and records
// the rates in col. prepareRoot is where prepare writes (the backing
// directory, to keep prepared files out of a cache), or root itself.
func measure(res results, col, root, prepareRoot string, p params, only func(workload) bool) error {
	for _, w := range workloads {
		if only != nil && !only(w) {
			continue
		}
		sub := filepath.Base(scratch(root, "w"))
		if err := mkdirs(filepath.Join(root, sub), filepath.Join(prepareRoot, sub)); err != nil {
			return err
		}
		rate, err := measureOne(w, filepath.Join(root, sub), filepath.Join(prepareRoot, sub), p)
		if err != nil {
			return fmt.Errorf("%s: %w", w.name, err)
		}
		res.set(w.name, col, rate)
		if err := removeAll(filepath.Join(root, sub), filepath.Join(prepareRoot, sub)); err != nil {
			return err
		}
	}
	return nil
}

// removeAll removes the scratch directories of a measurement, so that a
// run holds the data of one workload at a time rather than of all.
func removeAll(dirs ...string) error {
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
	}
	return nil
}

func measureOne(w workload, dir, prepareDir string, p params) (float64, error) {
	if w.prepare != nil {
		if err := w.prepare(prepareDir, p); err != nil {
			return 0, fmt.Errorf("prepare: %w", err)
		}
	}
	dropCaches()
	return timed(func() (float64, error) { return w.run(dir, p) })
}

func runRaw(c config, res results) error {
	dir := filepath.Join(c.work, "raw")
	if err := mkdirs(dir); err != nil {
		return err
	}
	return measure(res, colRaw, dir, dir, c.p, nil)
}

func runPassthrough(c config, res results) error {
	return measureMount(c, res, colPassthrough, "pt", mountLoopback)
}

// measureMount measures every workload in col on a FUSE file system that
// mount mounts over a backing directory of its own.
func measureMount(c config, res results, col, name string, mount func(dir, mnt string) (*fuse.Server, error)) error {
	dir, mnt := filepath.Join(c.work, name+"-backing"), filepath.Join(c.work, name+"-mnt")
	if err := mkdirs(dir, mnt); err != nil {
		return err
	}
	srv, err := mount(dir, mnt)
	if err != nil {
		return err
	}
	defer unmount(srv, mnt)
	return measure(res, col, mnt, dir, c.p, nil)
}

func isRead(w workload) bool { return w.prepare != nil && w.unit == "MB/s" }
func isData(w workload) bool { return w.unit == "MB/s" }

// runFUSE measures a FUSE file system whose daemon serves every read and
// write, as burstcache's does: the loopback without the kernel's
// passthrough.
func runFUSE(c config, res results) error {
	return measureMount(c, res, colFUSE, "fuse", mountFUSE)
}

// runCache measures burstcache over the local disk: every workload cold,
// then data workloads warm (re-read, or overwrite of cached extents), then
// warm again while write-back of other data runs.
func runCache(c config, res results) error {
	return withCache(c, "bc", false, func(bc *burstcache, backing string) error {
		return errors.Join(
			coldWarm(res, bc, bc.mnt, backing, c.p),
			duringWriteBack(res, bc, bc.mnt, backing, c),
		)
	})
}

// runClientCache measures data workloads warm, as runCache does, through a
// mount that keeps data in the kernel's page cache and gathers small writes
// in its write-back cache (local up --client-cache). The page cache is
// dropped before each measurement, as for the warm column.
func runClientCache(c config, res results) error {
	return withCache(c, "cc", true, func(bc *burstcache, _ string) error {
		for _, w := range workloads {
			if err := warmOnly(res, bc, w, c.p); err != nil {
				return err
			}
		}
		return nil
	})
}

// withCache starts a standalone cache over a backing directory of its own,
// with directories named after name, runs fn on it, and stops it.
func withCache(c config, name string, clientCache bool, fn func(bc *burstcache, backing string) error) error {
	if _, err := os.Stat(c.bin); err != nil {
		log.Printf("Skipping burstcache: %v (run make build)", err)
		return nil
	}
	backing, mnt := filepath.Join(c.work, name+"-backing"), filepath.Join(c.work, name+"-mnt")
	if err := mkdirs(backing, mnt); err != nil {
		return err
	}
	bc := &burstcache{bin: c.bin, mnt: mnt, servers: c.servers, capacity: c.capacity, clientCache: clientCache}
	if err := bc.up(backing, filepath.Join(c.work, name+"-cache")); err != nil {
		return err
	}
	return errors.Join(fn(bc, backing), bc.down())
}

// warmOnly runs a data workload once in a fresh directory of bc's mount, so
// that its data is cached, and measures it again in colClientCache.
func warmOnly(res results, bc *burstcache, w workload, p params) error {
	if !isData(w) {
		return nil
	}
	if err := bc.writeBack(); err != nil {
		return err
	}
	dir := scratch(bc.mnt, "w")
	if err := mkdirs(dir); err != nil {
		return err
	}
	if _, err := measureOne(w, dir, dir, p); err != nil {
		return fmt.Errorf("%s: %w", w.name, err)
	}
	dropCaches()
	rate, err := timed(func() (float64, error) { return w.run(dir, p) })
	if err != nil {
		return fmt.Errorf("%s: %w", w.name, err)
	}
	res.set(w.name, colClientCache, rate)
	return removeAll(dir)
}

func coldWarm(res results, bc *burstcache, mnt, backing string, p params) error {
	for _, w := range workloads {
		if err := bc.writeBack(); err != nil {
			return err
		}
		sub := filepath.Base(scratch(mnt, "w"))
		dir, pdir := filepath.Join(mnt, sub), filepath.Join(backing, sub)
		if err := mkdirs(dir); err != nil {
			return err
		}
		cold, err := measureOne(w, dir, pdir, p)
		if err != nil {
			return fmt.Errorf("%s cold: %w", w.name, err)
		}
		res.set(w.name, colCold, cold)
		if isData(w) {
			dropCaches()
			warm, err := timed(func() (float64, error) { return w.run(dir, p) })
			if err != nil {
				return fmt.Errorf("%s warm: %w", w.name, err)
			}
			res.set(w.name, colWarm, warm)
		}
		if err := removeAll(dir, pdir); err != nil {
			return err
		}
	}
	return nil
}

// duringWriteBack writes ballast dirty data, starts its write-back, and
// measures warm data workloads while it runs. Each workload first runs
// once, after a write-back, so that its data is in the state of the warm
// column: cached (out of the page cache, which is dropped before the
// measurement), and for writes dirty. A write to a clean extent copies
// the extent to a new slot first (copy-on-write), which a write to a dirty
// one does not; measuring overwrites of clean extents here against those
// of dirty ones in the warm column would count that copy as the cost of
// the write-back.
func duringWriteBack(res results, bc *burstcache, mnt, _ string, c config) error {
	for _, w := range workloads {
		if !isData(w) {
			continue
		}
		dir := scratch(mnt, "wb")
		if err := mkdirs(dir); err != nil {
			return err
		}
		if w.prepare != nil {
			if err := w.prepare(dir, c.p); err != nil {
				return err
			}
		}
		if err := bc.writeBack(); err != nil {
			return err
		}
		if _, err := w.run(dir, c.p); err != nil {
			return err
		}
		ballast := scratch(mnt, "ballast")
		if err := mkdirs(ballast); err != nil {
			return err
		}
		bp := c.p
		bp.procs, bp.fileSize = 1, c.ballast
		if _, err := seqWrite(false)(ballast, bp); err != nil {
			return err
		}
		dropCaches() // as before the warm column's runs
		wait := bc.flushAsync(ballast)
		rate, err := timed(func() (float64, error) { return w.run(dir, c.p) })
		if werr := wait(); werr != nil {
			err = errors.Join(err, werr)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", w.name, err)
		}
		res.set(w.name, colWriteBack, rate)
		if err := removeAll(dir, ballast); err != nil {
			return err
		}
	}
	return nil
}

// runSlow measures the latency-injected backing store alone, and burstcache
// over it: reading data that only the backing store holds (every extent is
// copied up from it), and then again once the data is cached.
func runSlow(c config, res results) error {
	dir, smnt := filepath.Join(c.work, "slow-backing"), filepath.Join(c.work, "slow-mnt")
	if err := mkdirs(dir, smnt); err != nil {
		return err
	}
	srv, err := mountSlow(dir, smnt, c.delay)
	if err != nil {
		return err
	}
	defer unmount(srv, smnt)
	if err := measure(res, colSlow, smnt, dir, c.p, nil); err != nil {
		return err
	}
	if _, err := os.Stat(c.bin); err != nil {
		return nil
	}
	return slowCached(c, res, srv, smnt)
}

func slowCached(c config, res results, _ *fuse.Server, smnt string) error {
	mnt := filepath.Join(c.work, "slowbc-mnt")
	if err := mkdirs(mnt); err != nil {
		return err
	}
	bc := &burstcache{bin: c.bin, mnt: mnt, servers: c.servers, capacity: c.capacity}
	if err := bc.up(smnt, filepath.Join(c.work, "slowbc-cache")); err != nil {
		return err
	}
	err := func() error {
		for _, w := range workloads {
			if !isRead(w) {
				continue
			}
			sub := filepath.Base(scratch(mnt, "w"))
			dir, sdir := filepath.Join(mnt, sub), filepath.Join(smnt, sub)
			if err := mkdirs(dir); err != nil {
				return err
			}
			cold, err := measureOne(w, dir, sdir, c.p)
			if err != nil {
				return fmt.Errorf("%s cold: %w", w.name, err)
			}
			res.set(w.name, colSlowCold, cold)
			dropCaches()
			rate, err := timed(func() (float64, error) { return w.run(dir, c.p) })
			if err != nil {
				return fmt.Errorf("%s: %w", w.name, err)
			}
			res.set(w.name, colSlowCached, rate)
			if err := removeAll(dir); err != nil {
				return err
			}
		}
		return nil
	}()
	return errors.Join(err, bc.down())
}
