package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/backing"
)

// The benchmarks move benchVolume bytes per iteration in 1 MiB calls, through
// the engine and, as the baseline, through plain files on the same disk, and
// report both rates and their ratio ("x-baseline"). The read benchmarks
// also report the CPU time both spend per GB moved.
const (
	benchMiB    = 1 << 20
	benchVolume = 256 * benchMiB
)

type benchRig struct {
	b    *testing.B
	dir  string // on the disk under test: cache, backing and plain files
	e    *Engine
	data []byte
}

func newBenchRig(b *testing.B, tun Tunables) *benchRig {
	return newBenchRigAt(b, tun, "")
}

// newBenchRigAt puts the cache directory under cacheDir instead of the disk
// of the backing and plain files, when cacheDir is not empty.
func newBenchRigAt(b *testing.B, tun Tunables, cacheDir string) *benchRig {
	dir := b.TempDir()
	if cacheDir == "" {
		cacheDir = dir
	}
	tun.WriteWindow = WriteWindow{Multiplier: -1}
	e, err := Open(Config{
		Dir: filepath.Join(cacheDir, "cache"), Backing: backing.NewDir(filepath.Join(dir, "backing")),
		Capacity: 2 * benchVolume, Tunables: tun, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	data := make([]byte, benchMiB)
	for i := range data {
		data[i] = byte(i*7 + i>>11)
	}
	return &benchRig{b: b, dir: dir, e: e, data: data}
}

// timed runs fn and returns its rate in MB/s of benchVolume.
func timed(b *testing.B, fn func() error) float64 {
	start := time.Now()
	if err := fn(); err != nil {
		b.Fatal(err)
	}
	return float64(benchVolume) / 1e6 / time.Since(start).Seconds()
}

// timedCPU runs fn like timed and also returns the CPU time the process
// spent meanwhile, in all its threads and in the kernel on their behalf
// (copies the kernel makes count here). On a shared machine it varies far
// less than the rate, which waits for the disk and for other processes.
func timedCPU(b *testing.B, fn func() error) (float64, time.Duration) {
	before := cpuTime(b)
	rate := timed(b, fn)
	return rate, cpuTime(b) - before
}

func cpuTime(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// report accumulates rates, and CPU times when measured, over the
// iterations and reports their means.
type report struct {
	engine, base         float64
	engineCPU, baseCPU   time.Duration
	engineDisk, baseDisk diskReads
}

// diskReads counts the read requests a disk completed and the bytes they
// read (/proc/diskstats).
type diskReads struct{ requests, bytes int64 }

// readsOf returns what the disk holding dir has read since it started, and
// false where the kernel does not say (dir on tmpfs, or no /proc).
func readsOf(dir string) (diskReads, bool) {
	var st unix.Stat_t
	stats, err := os.ReadFile("/proc/diskstats")
	if err != nil || unix.Stat(dir, &st) != nil {
		return diskReads{}, false
	}
	for line := range strings.Lines(string(stats)) {
		var major, minor uint32
		var name string
		var reads, merged, sectors int64
		if _, err := fmt.Sscan(line, &major, &minor, &name, &reads, &merged, &sectors); err != nil {
			continue
		}
		if major == unix.Major(st.Dev) && minor == unix.Minor(st.Dev) {
			return diskReads{reads, sectors * 512}, true
		}
	}
	return diskReads{}, false
}

// countReads adds to *into the reads of the disk holding dir while fn runs.
func countReads(dir string, into *diskReads, fn func()) {
	before, ok := readsOf(dir)
	fn()
	if after, ok2 := readsOf(dir); ok && ok2 {
		into.requests += after.requests - before.requests
		into.bytes += after.bytes - before.bytes
	}
}

// reportRequestSize reports the mean size of the disk's read requests.
func reportRequestSize(b *testing.B, d diskReads, unit string) {
	if d.requests > 0 {
		b.ReportMetric(float64(d.bytes)/float64(d.requests)/1024, unit)
	}
}

// timeEngine measures one run of the engine, with CPU time.
func (r *report) timeEngine(b *testing.B, fn func() error) {
	rate, cpu := timedCPU(b, fn)
	r.engine, r.engineCPU = r.engine+rate, r.engineCPU+cpu
}

// timeBase measures one run of the baseline, with CPU time.
func (r *report) timeBase(b *testing.B, fn func() error) {
	rate, cpu := timedCPU(b, fn)
	r.base, r.baseCPU = r.base+rate, r.baseCPU+cpu
}

func (r *report) done(b *testing.B) {
	n := float64(b.N)
	b.ReportMetric(r.engine/n, "engine-MB/s")
	b.ReportMetric(r.base/n, "baseline-MB/s")
	b.ReportMetric(r.engine/r.base, "x-baseline")
	if r.engineCPU > 0 {
		gb := n * benchVolume / 1e9
		b.ReportMetric(float64(r.engineCPU.Milliseconds())/gb, "engine-cpu-ms/GB")
		b.ReportMetric(float64(r.baseCPU.Milliseconds())/gb, "baseline-cpu-ms/GB")
	}
	reportRequestSize(b, r.engineDisk, "engine-KiB/read-request")
	reportRequestSize(b, r.baseDisk, "baseline-KiB/read-request")
}

func (br *benchRig) engineWrite(p string) error {
	for off := int64(0); off < benchVolume; off += benchMiB {
		if _, err := br.e.WriteAt(context.Background(), p, br.data, off); err != nil {
			return err
		}
	}
	return nil
}

func (br *benchRig) engineRead(p string) error {
	buf := make([]byte, benchMiB)
	for off := int64(0); off < benchVolume; off += benchMiB {
		if _, err := br.e.ReadAt(context.Background(), p, buf, off); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
	}
	return nil
}

// plainWrite writes a new plain file of benchVolume bytes.
func (br *benchRig) plainWrite(p string) error {
	f, err := os.Create(filepath.Join(br.dir, p))
	if err != nil {
		return err
	}
	defer f.Close()
	for off := int64(0); off < benchVolume; off += benchMiB {
		if _, err := f.WriteAt(br.data, off); err != nil {
			return err
		}
	}
	return nil
}

func (br *benchRig) plainRead(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, benchMiB)
	for off := int64(0); off < benchVolume; off += benchMiB {
		if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
			return err
		}
	}
	return nil
}

// dropPageCache evicts a file from the page cache, so that reading it
// reads the disk.
func dropPageCache(b *testing.B, p string) {
	f, err := os.Open(p)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := errJoin(f.Sync(), unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)); err != nil {
		b.Fatal(err)
	}
}

// syncPlain makes a plain file durable.
func syncPlain(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	return errJoin(f.Sync(), f.Close())
}

func errJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// BenchmarkSequentialWrite: 1 MiB writes of new data into the cache against
// 1 MiB writes into a new plain file on the same disk.
func BenchmarkSequentialWrite(b *testing.B) {
	br := newBenchRig(b, Tunables{DirtyHigh: 100, DirtyLow: 100, EvictHigh: 100, EvictLow: 100})
	b.SetBytes(benchVolume)
	var r report
	for i := range b.N {
		p := fmt.Sprint("w", i)
		r.engine += timed(b, func() error { return br.engineWrite(p) })
		r.base += timed(b, func() error { return br.plainWrite(p) })
		b.StopTimer()
		// Make room for the next iteration: drop the file, commit.
		if err := errJoin(br.e.Drop(context.Background(), p), br.e.Sync(context.Background(), p)); err != nil {
			b.Fatal(err)
		}
		os.Remove(filepath.Join(br.dir, p))
		b.StartTimer()
	}
	r.done(b)
}

// BenchmarkSequentialReadHit: 1 MiB reads of cached data against 1 MiB reads
// of a plain file that the page cache holds as well. Both are written and
// made durable first: otherwise the engine's first index commit, which
// fdatasyncs the slab, flushes the 256 MiB just written in the engine's own
// threads while the hits are timed, whereas the plain file is flushed by
// the kernel's threads, which the CPU time does not count.
func BenchmarkSequentialReadHit(b *testing.B) {
	br := newBenchRig(b, Tunables{DirtyHigh: 100, DirtyLow: 100, EvictHigh: 100, EvictLow: 100})
	if err := errJoin(br.engineWrite("r"), br.plainWrite("r")); err != nil {
		b.Fatal(err)
	}
	if err := errJoin(br.e.Sync(context.Background(), "r"), syncPlain(filepath.Join(br.dir, "r"))); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchVolume)
	b.ResetTimer()
	var r report
	for range b.N {
		r.timeEngine(b, func() error { return br.engineRead("r") })
		r.timeBase(b, func() error { return br.plainRead(filepath.Join(br.dir, "r")) })
	}
	r.done(b)
}

// BenchmarkCopyUp: cold reads through the cache (copy-up of every extent)
// against reading the backing file directly, both from disk. With the cache
// on the disk of the backing files, the disk also absorbs the slab writes;
// on a burst-buffer node the cache is another device, which "separate-cache"
// stands in for with a tmpfs cache directory.
func BenchmarkCopyUp(b *testing.B) {
	b.Run("same-disk", func(b *testing.B) { benchCopyUp(b, newBenchRig(b, Tunables{})) })
	b.Run("separate-cache", func(b *testing.B) {
		if _, err := os.Stat("/dev/shm"); err != nil {
			b.Skip("no /dev/shm")
		}
		benchCopyUp(b, newBenchRigAt(b, Tunables{}, shmDirB(b)))
	})
}

func shmDirB(b *testing.B) string {
	d, err := os.MkdirTemp("/dev/shm", "engine-bench-")
	if err != nil {
		b.Skip(err)
	}
	b.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func benchCopyUp(b *testing.B, br *benchRig) {
	bp := filepath.Join(br.dir, "backing", "c")
	if err := os.MkdirAll(filepath.Dir(bp), 0o755); err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(bp)
	if err != nil {
		b.Fatal(err)
	}
	for off := int64(0); off < benchVolume; off += benchMiB {
		f.WriteAt(br.data, off)
	}
	f.Close()
	b.SetBytes(benchVolume)
	b.ResetTimer()
	var r report
	for range b.N {
		b.StopTimer()
		if err := errJoin(br.e.InvalidatePath(context.Background(), "c"), br.e.Sync(context.Background(), "c")); err != nil {
			b.Fatal(err)
		}
		dropPageCache(b, bp)
		b.StartTimer()
		countReads(bp, &r.engineDisk, func() { r.timeEngine(b, func() error { return br.engineRead("c") }) })
		b.StopTimer()
		dropPageCache(b, bp)
		b.StartTimer()
		countReads(bp, &r.baseDisk, func() { r.timeBase(b, func() error { return br.plainRead(bp) }) })
	}
	r.done(b)
}

// BenchmarkWriteBack: draining benchVolume dirty bytes with 1, 4 and 8
// write-back threads against a plain copy of a file of the same size, made
// durable with fsync as write-back makes its copies.
func BenchmarkWriteBack(b *testing.B) {
	for _, threads := range []int{1, 4, 8} {
		b.Run(fmt.Sprint("threads-", threads), func(b *testing.B) {
			tun := Tunables{WriteBackThreads: threads, DirtyHigh: 100, DirtyLow: 100, EvictHigh: 100, EvictLow: 100}
			br := newBenchRig(b, tun)
			if err := br.plainWrite("src"); err != nil {
				b.Fatal(err)
			}
			br.drain(
				func(i int) error { return br.engineWrite(fmt.Sprint("wb", i)) },
				func(i int) error { return br.plainCopy("src", fmt.Sprint("copy", i)) },
				func(i int) error {
					p := fmt.Sprint("wb", i)
					return errJoin(br.e.Drop(context.Background(), p), br.e.Sync(context.Background(), p))
				})
		})
	}
}

// BenchmarkWriteBackFiles: draining benchVolume dirty bytes in files of one
// extent each, with 4 write-back threads, against a plain copy of the
// files, each fsynced. Each file written back needs an fsync of its own.
func BenchmarkWriteBackFiles(b *testing.B) {
	const fileSize = benchMiB
	const files = benchVolume / fileSize
	tun := Tunables{WriteBackThreads: 4, DirtyHigh: 100, DirtyLow: 100, EvictHigh: 100, EvictLow: 100}
	br := newBenchRig(b, tun)
	plain := filepath.Join(br.dir, "plain")
	if err := os.Mkdir(plain, 0o755); err != nil {
		b.Fatal(err)
	}
	br.drain(
		func(i int) error {
			for j := range files {
				if _, err := br.e.WriteAt(context.Background(), fmt.Sprintf("files%d/%d", i, j), br.data[:fileSize], 0); err != nil {
					return err
				}
			}
			return nil
		},
		func(i int) error {
			for j := range files {
				f, err := os.Create(filepath.Join(plain, fmt.Sprint(i, "-", j)))
				if err != nil {
					return err
				}
				_, err = f.Write(br.data[:fileSize])
				if err := errJoin(err, errJoin(f.Sync(), f.Close())); err != nil {
					return err
				}
			}
			return nil
		},
		func(i int) error { return br.e.FlushAndDrop(context.Background(), fmt.Sprint("files", i)) })
}

// drain measures, in each iteration, a Flush of the benchVolume dirty bytes
// that write(i) leaves, against base(i); write and drop(i), which forgets
// what write(i) wrote, are not timed.
func (br *benchRig) drain(write, base, drop func(i int) error) {
	b := br.b
	b.SetBytes(benchVolume)
	b.ResetTimer()
	var r report
	for i := range b.N {
		b.StopTimer()
		if err := write(i); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		r.engine += timed(b, func() error { return br.e.Flush(context.Background()) })
		r.base += timed(b, func() error { return base(i) })
		b.StopTimer()
		if err := drop(i); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	r.done(b)
}

// plainCopy copies a plain file in 1 MiB reads and writes, and fsyncs the
// copy.
func (br *benchRig) plainCopy(from, to string) error {
	src, err := os.Open(filepath.Join(br.dir, from))
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(filepath.Join(br.dir, to))
	if err != nil {
		return err
	}
	defer dst.Close()
	buf := make([]byte, benchMiB)
	for off := int64(0); off < benchVolume; off += benchMiB {
		if _, err := src.ReadAt(buf, off); err != nil && err != io.EOF {
			return err
		}
		if _, err := dst.WriteAt(buf, off); err != nil {
			return err
		}
	}
	return dst.Sync()
}

// BenchmarkLayout measures the choice of on-disk layout: extents written as
// overwrites of a preallocated slab file against one new file per extent.
func BenchmarkLayout(b *testing.B) {
	dir := b.TempDir()
	data := make([]byte, benchMiB)
	slab, err := os.Create(filepath.Join(dir, "slab"))
	if err != nil {
		b.Fatal(err)
	}
	defer slab.Close()
	if err := unix.Fallocate(int(slab.Fd()), 0, 0, benchVolume); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchVolume)
	var r report
	for i := range b.N {
		r.engine += timed(b, func() error {
			for off := int64(0); off < benchVolume; off += benchMiB {
				if _, err := slab.WriteAt(data, off); err != nil {
					return err
				}
			}
			return nil
		})
		r.base += timed(b, func() error {
			for n := range benchVolume / benchMiB {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprint("e", i, "-", n)), data, 0o600); err != nil {
					return err
				}
			}
			return nil
		})
	}
	r.done(b)
}

// BenchmarkWriteBackSmallFiles: a flush that writes back 10,000 new files
// of 4 KiB, 1,000 in each of ten directories that the backing store lacks
// too, with 4 write-back threads, against creating the plain files and
// fsyncing each. Write-back creates every file and directory, and makes
// their names durable (rule 8) as well as their data.
func BenchmarkWriteBackSmallFiles(b *testing.B) {
	const dirs, perDir, size = 10, 1000, 4096
	dir := b.TempDir()
	e, err := Open(Config{
		Dir: filepath.Join(dir, "cache"), Backing: backing.NewDir(filepath.Join(dir, "backing")),
		ExtentSize: size, Capacity: 2 * dirs * perDir * size, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Tunables: Tunables{WriteBackThreads: 4, DirtyHigh: 100, DirtyLow: 100, EvictHigh: 100, EvictLow: 100, WriteWindow: WriteWindow{Multiplier: -1}},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	data := bytes.Repeat([]byte("s"), size)
	name := func(i, d, f int) string { return fmt.Sprintf("run%d/d%d/f%d", i, d, f) }
	var engine, plain time.Duration
	for i := range b.N {
		for d := range dirs {
			for f := range perDir {
				if _, err := e.WriteAt(context.Background(), name(i, d, f), data, 0); err != nil {
					b.Fatal(err)
				}
			}
		}
		start := time.Now()
		if err := e.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
		engine += time.Since(start)
		start = time.Now()
		for d := range dirs {
			p := filepath.Join(dir, "plain", name(i, d, 0))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
			for f := range perDir {
				if err := writeSyncedFile(filepath.Join(dir, "plain", name(i, d, f)), data); err != nil {
					b.Fatal(err)
				}
			}
		}
		plain += time.Since(start)
		if err := e.FlushAndDrop(context.Background(), fmt.Sprint("run", i)); err != nil {
			b.Fatal(err)
		}
	}
	n := float64(b.N * dirs * perDir)
	b.ReportMetric(n/engine.Seconds(), "engine-files/s")
	b.ReportMetric(n/plain.Seconds(), "baseline-files/s")
	b.ReportMetric(plain.Seconds()/engine.Seconds(), "x-baseline")
}

// writeSyncedFile creates p with data and fsyncs it.
func writeSyncedFile(p string, data []byte) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	return errJoin(err, errJoin(f.Sync(), f.Close()))
}

// BenchmarkNameChanges times what making the names of metadata calls
// durable costs them (NamesChanged): empty files created, then renamed
// within their directories, on the backing store as a metadata server
// does, each call then telling an engine. With Durability Backing each
// call fsyncs the directories from its own up to the root before it
// returns; with Cache it only records them, and the flush after fsyncs
// each directory once. The baseline makes the same calls on a plain
// directory, telling nobody, as before the names were made durable.
func BenchmarkNameChanges(b *testing.B) {
	const dirs, perDir = 10, 50
	dir := b.TempDir()
	engines := map[Durability]*Engine{}
	for _, d := range []Durability{Cache, Backing} {
		e, err := Open(Config{
			Dir: filepath.Join(dir, "cache-"+string(d)), Backing: backing.NewDir(filepath.Join(dir, string(d))),
			ExtentSize: 4096, Capacity: 64 * 4096, Durability: d, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			b.Fatal(err)
		}
		defer e.Close()
		engines[d] = e
	}
	var plain, cached, durable, flush time.Duration
	for i := range b.N {
		plain += nameChanges(b, filepath.Join(dir, "plain"), i, dirs, perDir, nil)
		cached += nameChanges(b, filepath.Join(dir, string(Cache)), i, dirs, perDir, engines[Cache])
		start := time.Now()
		if err := engines[Cache].Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
		flush += time.Since(start)
		durable += nameChanges(b, filepath.Join(dir, string(Backing)), i, dirs, perDir, engines[Backing])
	}
	ops := float64(2 * b.N * dirs * perDir)
	b.ReportMetric(ops/plain.Seconds(), "baseline-ops/s")
	b.ReportMetric(ops/cached.Seconds(), "cache-ops/s")
	b.ReportMetric(ops/durable.Seconds(), "backing-ops/s")
	b.ReportMetric(float64(flush.Milliseconds())/float64(b.N), "cache-flush-ms")
	b.ReportMetric(plain.Seconds()/cached.Seconds(), "cache-x-baseline")
	b.ReportMetric(plain.Seconds()/durable.Seconds(), "backing-x-baseline")
}

// nameChanges creates perDir empty files in each of dirs new directories
// under root, then renames each, telling e of every name (none when nil),
// and returns the time the creates and renames took, the directories'
// creation left out.
func nameChanges(b *testing.B, root string, run, dirs, perDir int, e *Engine) time.Duration {
	b.Helper()
	ctx := context.Background()
	changed := func(paths ...string) {
		if e == nil {
			return
		}
		if err := e.NamesChanged(ctx, paths...); err != nil {
			b.Fatal(err)
		}
	}
	var spent time.Duration
	for d := range dirs {
		sub := fmt.Sprintf("run%d/d%d", run, d)
		if err := os.MkdirAll(filepath.Join(root, sub), 0o755); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for f := range perDir {
			p := fmt.Sprintf("%s/f%d", sub, f)
			if err := os.WriteFile(filepath.Join(root, p), nil, 0o644); err != nil {
				b.Fatal(err)
			}
			changed(p)
		}
		for f := range perDir {
			from, to := fmt.Sprintf("%s/f%d", sub, f), fmt.Sprintf("%s/g%d", sub, f)
			if err := os.Rename(filepath.Join(root, from), filepath.Join(root, to)); err != nil {
				b.Fatal(err)
			}
			changed(from, to)
		}
		spent += time.Since(start)
	}
	return spent
}
