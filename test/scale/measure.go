package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

const (
	poolName  = "scale"
	namespace = "scale"
	// creators is how many instances are created at once, as a busy
	// cluster's users would.
	creators = 16
)

// row is one measurement.
type row struct {
	instances        int
	ready, deleted   time.Duration
	cpu              time.Duration
	peakRSS          int64
	readyCPU, delCPU time.Duration
}

func pool() *cachev1alpha1.CachePool {
	return &cachev1alpha1.CachePool{
		ObjectMeta: metav1.ObjectMeta{Name: poolName},
		Spec: cachev1alpha1.CachePoolSpec{
			Nodes: &cachev1alpha1.NodePlacement{NodeSelector: map[string]string{"node.burstcache.io/nvme": "true"}},
			Media: cachev1alpha1.CacheMedia{
				HostPath:        &cachev1alpha1.HostPathSource{Path: "/mnt/nvme/burstcache"},
				CapacityPerNode: resource.MustParse("4Ti"),
			},
			AllocationGranularity: resource.MustParse("1Ti"),
			BackingFilesystems: []cachev1alpha1.BackingFilesystem{{
				Name: "pfs", MountPath: "/pfs", HostPath: &cachev1alpha1.HostPathSource{Path: "/pfs"},
				AccessRules: []cachev1alpha1.AccessRule{{
					Namespaces: []string{namespace}, PathPrefixes: []cachev1alpha1.AbsolutePath{"/pfs"},
					UIDRanges: []cachev1alpha1.IDRange{{Min: 1000, Max: 1000}}, GIDRanges: []cachev1alpha1.IDRange{{Min: 1000, Max: 1000}},
				}},
			}},
		},
	}
}

func instance(i int) *cachev1alpha1.CacheInstance {
	return &cachev1alpha1.CacheInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "job-" + strconv.Itoa(i), Namespace: namespace},
		Spec: cachev1alpha1.CacheInstanceSpec{
			Capacity: resource.MustParse("1Ti"), Pool: poolName,
			Backing: &cachev1alpha1.BackingPath{Filesystem: "pfs", Path: cachev1alpha1.AbsolutePath("/pfs/job-" + strconv.Itoa(i))},
			RunAs:   cachev1alpha1.RunAs{UID: 1000, GID: 1000},
		},
	}
}

// measure creates n instances, waits until all are Ready, deletes them and
// waits until they and their server pods are gone.
func measure(ctx context.Context, cl *cluster, n int) (row, error) {
	if err := ensureNamespace(ctx, cl.c); err != nil {
		return row{}, err
	}
	pid := cl.manager.Process.Pid
	resetPeak(pid)
	r := row{instances: n}
	cpu0, start := cpuTime(pid), time.Now()
	if err := forEach(ctx, n, func(i int) error { return cl.c.Create(ctx, instance(i)) }); err != nil {
		return r, err
	}
	if err := waitCount(ctx, cl.c, n, func(l []cachev1alpha1.CacheInstance) int { return countPhase(l, cachev1alpha1.PhaseReady) }, "Ready"); err != nil {
		return r, err
	}
	r.ready, r.readyCPU = time.Since(start), cpuTime(pid)-cpu0
	cpu1, start := cpuTime(pid), time.Now()
	if err := forEach(ctx, n, func(i int) error { return client.IgnoreNotFound(cl.c.Delete(ctx, instance(i))) }); err != nil {
		return r, err
	}
	if err := waitCount(ctx, cl.c, 0, func(l []cachev1alpha1.CacheInstance) int { return len(l) }, "left"); err != nil {
		return r, err
	}
	if err := waitPodsGone(ctx, cl.c); err != nil {
		return r, err
	}
	r.deleted, r.delCPU = time.Since(start), cpuTime(pid)-cpu1
	r.cpu, r.peakRSS = r.readyCPU+r.delCPU, peakRSS(pid)
	log.Printf("%d instances: Ready after %s, gone after %s more, manager CPU %s, peak RSS %d MiB",
		n, r.ready.Round(time.Second), r.deleted.Round(time.Second), r.cpu.Round(time.Second/10), r.peakRSS>>20)
	return r, nil
}

func ensureNamespace(ctx context.Context, c client.Client) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	return client.IgnoreAlreadyExists(c.Create(ctx, ns))
}

// forEach runs fn for 0..n-1 with `creators` goroutines.
func forEach(ctx context.Context, n int, fn func(int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, creators)
	next := make(chan int)
	for range creators {
		wg.Go(func() {
			for i := range next {
				if err := fn(i); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return ctx.Err()
	}
}

func countPhase(l []cachev1alpha1.CacheInstance, p cachev1alpha1.Phase) int {
	n := 0
	for _, inst := range l {
		if inst.Status.Phase == p {
			n++
		}
	}
	return n
}

// waitCount waits until count(instances) == want, logging progress.
func waitCount(ctx context.Context, c client.Client, want int, count func([]cachev1alpha1.CacheInstance) int, what string) error {
	last := time.Now()
	for deadline := time.Now().Add(30 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		var l cachev1alpha1.CacheInstanceList
		if err := c.List(ctx, &l, client.InNamespace(namespace)); err != nil {
			return err
		}
		got := count(l.Items)
		if got == want {
			return nil
		}
		if time.Since(last) > 15*time.Second {
			log.Printf("%d instances %s, waiting for %d", got, what, want)
			last = time.Now()
		}
	}
	return fmt.Errorf("instances %s never reached %d", what, want)
}

func waitPodsGone(ctx context.Context, c client.Client) error {
	return waitFor(10*time.Minute, func() bool {
		var pods corev1.PodList
		return c.List(ctx, &pods, client.InNamespace(namespace)) == nil && len(pods.Items) == 0
	})
}

// cpuTime is the user and system CPU time a process has used, from
// /proc/PID/stat (in clock ticks of 10 ms, as on every Linux we run on).
func cpuTime(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// peakRSS is the process's peak resident memory (VmHWM) since resetPeak.
func peakRSS(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// resetPeak resets the process's VmHWM to its current RSS, so that each
// measurement reports its own peak.
func resetPeak(pid int) {
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}
