package posix

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fioJob is a workload of fio that writes blocks stamped with their offset
// and a checksum, then reads every block back and checks it.
type fioJob struct {
	name string
	spec string
}

// fioJobs are the workloads TestFio runs, chosen for what HPC and AI jobs
// do to a shared file system and for what a cache can get wrong: several
// processes at queue depth on one shared file, reads of blocks while others
// are being written, sizes that straddle pages and extents, mappings, and
// direct I/O larger than a FUSE request.
var fioJobs = []fioJob{
	{"shared file, direct, queue depth", `
filename=shared-direct
rw=randwrite
direct=1
ioengine=libaio
iodepth=16
bs=4k
size=32M
offset_increment=32M
numjobs=4
`},
	{"shared file, verifying while writing", `
filename=shared-backlog
rw=randwrite
direct=1
ioengine=libaio
iodepth=8
bs=16k
size=32M
offset_increment=32M
numjobs=3
verify_backlog=64
`},
	{"file per process, buffered, mixed sizes", `
rw=randrw
ioengine=psync
bsrange=4k-64k
size=32M
numjobs=3
`},
	{"mapped writes", `
rw=randwrite
ioengine=mmap
bs=8k
size=16M
numjobs=2
`},
	{"unaligned sequential writes", `
rw=write
ioengine=psync
bsrange=1k-300k
bs_unaligned=1
size=32M
numjobs=2
`},
	{"large direct writes", `
rw=randwrite
ioengine=libaio
direct=1
iodepth=8
bs=1m
size=64M
numjobs=2
`},
}

// TestFio runs fio's verifying workloads over the mount, with and without
// the client cache, then checks with fio that the backing directory holds
// every block once the cache wrote it back.
func TestFio(t *testing.T) {
	bin := debianTool(t, "fio")
	for name, opts := range map[string][]mountOption{
		"no client cache": nil,
		"client cache":    {withClientCache()},
	} {
		t.Run(name, func(t *testing.T) {
			dir, backing := mountUnderTest(t, opts...)
			for i, job := range fioJobs {
				t.Run(job.name, func(t *testing.T) {
					sub := fmt.Sprintf("fio-%d", i)
					if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
						t.Fatal(err)
					}
					runFio(t, bin, job.conf(t, filepath.Join(dir, sub)))
					settleBacking(t, dir)
					runFio(t, bin, job.conf(t, filepath.Join(backing, sub)), "--verify_only")
				})
			}
		})
	}
}

// conf writes a job file that runs j in directory and returns its path.
func (j fioJob) conf(t *testing.T, directory string) string {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "job.fio")
	spec := fmt.Sprintf("[global]\nverify=crc32c\nverify_fatal=1\ndirectory=%s\n[job]%s", directory, j.spec)
	if err := os.WriteFile(conf, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return conf
}

// runFio runs fio on the job file conf with args, in a directory of its
// own for the state files it leaves, and fails the test on any error fio
// reports.
func runFio(t *testing.T, bin, conf string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, append(args, conf)...)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("fio %s: %v\n%s", strings.Join(args, " "), err, ends(out, 0, 4000))
	}
	if !strings.Contains(string(out), "Run status") {
		t.Fatalf("fio %s reported no run:\n%s", strings.Join(args, " "), ends(out, 0, 4000))
	}
}
