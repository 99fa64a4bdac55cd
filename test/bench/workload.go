package main

import (
	"crypto/rand"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// workload is one measured I/O pattern against a directory.
type workload struct {
	name string
	// unit is what the rate counts: "MB/s" or "ops/s".
	unit string
	// prepare lays out what run needs (for example the files a read
	// workload reads); it is not timed.
	prepare func(dir string, p params) error
	// run does the timed work and returns how many units it did.
	run func(dir string, p params) (float64, error)
}

// params size a workload; they come from flags.
type params struct {
	procs     int   // concurrent writers or readers, like IOR's processes
	fileSize  int64 // bytes per process for file-per-process, per segment for shared
	blockSize int   // transfer size of sequential workloads
	randOps   int   // operations of each random workload
	metaFiles int   // files of the metadata workloads
}

const mb = 1e6

func fppPath(dir string, i int) string { return filepath.Join(dir, fmt.Sprintf("fpp.%d", i)) }
func sharedPath(dir string) string     { return filepath.Join(dir, "shared") }

var workloads = []workload{
	{name: "seq write, file per process", unit: "MB/s", run: seqWrite(false)},
	{name: "seq read, file per process", unit: "MB/s", prepare: seqPrepare(false), run: seqRead(false)},
	{name: "seq write, shared file", unit: "MB/s", run: seqWrite(true)},
	{name: "seq read, shared file", unit: "MB/s", prepare: seqPrepare(true), run: seqRead(true)},
	{name: "4 KiB random read", unit: "MB/s", prepare: seqPrepare(true), run: randIO(false)},
	{name: "4 KiB random write", unit: "MB/s", prepare: seqPrepare(true), run: randIO(true)},
	{name: "create+close", unit: "ops/s", run: metaCreate},
	{name: "stat", unit: "ops/s", prepare: metaPrepare, run: metaStat},
	{name: "unlink", unit: "ops/s", prepare: metaPrepare, run: metaUnlink},
}

// target returns the file and offset process i writes or reads.
func target(dir string, p params, shared bool, i int) (string, int64) {
	if shared {
		return sharedPath(dir), int64(i) * p.fileSize
	}
	return fppPath(dir, i), 0
}

func parallel(n int, fn func(i int) error) error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(i)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func randomBlock(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// writeSegment writes size bytes at off of name in blocks, then fsyncs and
// closes it, as IOR does with -e.
func writeSegment(name string, off, size int64, block []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	for done := int64(0); done < size; done += int64(len(block)) {
		if _, err := f.WriteAt(block, off+done); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func readSegment(name string, off, size int64, buf []byte) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	for done := int64(0); done < size; done += int64(len(buf)) {
		if _, err := f.ReadAt(buf, off+done); err != nil {
			return fmt.Errorf("read %s at %d: %w", name, off+done, err)
		}
	}
	return nil
}

func seqWrite(shared bool) func(string, params) (float64, error) {
	return func(dir string, p params) (float64, error) {
		err := parallel(p.procs, func(i int) error {
			name, off := target(dir, p, shared, i)
			return writeSegment(name, off, p.fileSize, randomBlock(p.blockSize))
		})
		return float64(int64(p.procs)*p.fileSize) / mb, err
	}
}

func seqPrepare(shared bool) func(string, params) error {
	return func(dir string, p params) error {
		_, err := seqWrite(shared)(dir, p)
		return err
	}
}

func seqRead(shared bool) func(string, params) (float64, error) {
	return func(dir string, p params) (float64, error) {
		err := parallel(p.procs, func(i int) error {
			name, off := target(dir, p, shared, i)
			return readSegment(name, off, p.fileSize, make([]byte, p.blockSize))
		})
		return float64(int64(p.procs)*p.fileSize) / mb, err
	}
}

// randIO does 4 KiB reads or writes at random aligned offsets of the shared
// file, split over the processes. Each process takes the blocks whose
// number modulo the processes is its own, in random order, and none twice:
// a block read a second time would come from the page cache, on the file
// systems that have one.
func randIO(write bool) func(string, params) (float64, error) {
	const io = 4096
	return func(dir string, p params) (float64, error) {
		// The shared file holds procs x fileSize bytes: each process
		// owns fileSize / io of its blocks.
		blocks := p.fileSize / io
		ops := min(int64(p.randOps/p.procs), blocks)
		err := parallel(p.procs, func(i int) error {
			f, err := os.OpenFile(sharedPath(dir), os.O_RDWR, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			rng := mrand.New(mrand.NewPCG(uint64(i), 42))
			order := rng.Perm(int(blocks))
			buf := randomBlock(io)
			for _, b := range order[:ops] {
				off := (int64(b)*int64(p.procs) + int64(i)) * io
				if write {
					_, err = f.WriteAt(buf, off)
				} else {
					_, err = f.ReadAt(buf, off)
				}
				if err != nil {
					return err
				}
			}
			if write {
				return f.Sync()
			}
			return nil
		})
		return float64(ops*int64(p.procs)*io) / mb, err
	}
}

func metaName(dir string, i, j int) string {
	return filepath.Join(dir, fmt.Sprintf("meta.%d", i), fmt.Sprintf("f%d", j))
}

func metaEach(dir string, p params, fn func(name string) error) (float64, error) {
	per := p.metaFiles / p.procs
	err := parallel(p.procs, func(i int) error {
		if err := os.MkdirAll(filepath.Dir(metaName(dir, i, 0)), 0o755); err != nil {
			return err
		}
		for j := range per {
			if err := fn(metaName(dir, i, j)); err != nil {
				return err
			}
		}
		return nil
	})
	return float64(per * p.procs), err
}

func metaCreate(dir string, p params) (float64, error) {
	return metaEach(dir, p, func(name string) error {
		f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		return f.Close()
	})
}

func metaPrepare(dir string, p params) error {
	_, err := metaCreate(dir, p)
	return err
}

func metaStat(dir string, p params) (float64, error) {
	return metaEach(dir, p, func(name string) error {
		_, err := os.Stat(name)
		return err
	})
}

func metaUnlink(dir string, p params) (float64, error) {
	return metaEach(dir, p, os.Remove)
}

// timed runs fn and returns its units per second.
func timed(fn func() (float64, error)) (float64, error) {
	start := time.Now()
	units, err := fn()
	if err != nil {
		return 0, err
	}
	return units / time.Since(start).Seconds(), nil
}

// unique returns a random suffix for scratch names.
func unique() string {
	n, _ := rand.Int(rand.Reader, big.NewInt(1<<40))
	return n.Text(36)
}
