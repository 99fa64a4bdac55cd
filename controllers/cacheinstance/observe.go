package cacheinstance

import (
	"context"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	ctrl "sigs.k8s.io/controller-runtime"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/cacheserver/control"
)

// observeServers copies what the pods say into status.servers: pod, node,
// data endpoint and readiness.
func (r *Reconciler) observeServers(_ context.Context, s *scope) (ctrl.Result, error) {
	for i := range s.inst.Status.Servers {
		srv := &s.inst.Status.Servers[i]
		pod := s.pods[i]
		srv.Ready = pod != nil && podReady(pod)
		srv.Endpoint = ""
		if pod != nil && pod.Status.PodIP != "" {
			srv.Endpoint = net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(DataPort))
		}
	}
	return ctrl.Result{}, nil
}

func podReady(pod *corev1.Pod) bool {
	if !pod.DeletionTimestamp.IsZero() || pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// collectStats asks every ready server for its statistics and sums them
// into status.usage. A server that does not answer is logged (its
// readiness probe will tell the kubelet) and left out of this pass's sums,
// except for its dirty data, which stays on its SSD: usage.dirty counts
// what it held when it last answered.
func (r *Reconciler) collectStats(ctx context.Context, s *scope) (ctrl.Result, error) {
	for i, srv := range s.inst.Status.Servers {
		if !srv.Ready {
			continue
		}
		st, err := r.stats(ctx, s, i)
		if err != nil {
			ctrl.LoggerFrom(ctx).Info("Server did not answer for stats", "server", srv.Name, "error", err.Error())
			continue
		}
		s.stats[i] = st
	}
	if len(s.stats) > 0 {
		s.inst.Status.Usage = usageOf(s.inst.Status.Servers, s.stats)
	}
	return ctrl.Result{}, nil
}

// usageOf sums the statistics of the servers that answered, and records the
// dirty data of each in servers. The dirty data of a server that did not
// answer is what it last reported.
func usageOf(servers []cachev1alpha1.ServerStatus, stats map[int]control.Stats) *cachev1alpha1.Usage {
	u := sumUsage(stats)
	dirty := u.Dirty.Value()
	for i := range servers {
		if st, ok := stats[i]; ok {
			servers[i].Dirty = resource.NewQuantity(st.DirtyBytes, resource.BinarySI)
		} else if servers[i].Dirty != nil {
			dirty += servers[i].Dirty.Value()
		}
	}
	u.Dirty = resource.NewQuantity(dirty, resource.BinarySI)
	return u
}

func (r *Reconciler) stats(ctx context.Context, s *scope, i int) (control.Stats, error) {
	c, err := r.client(ctx, s, i)
	if err != nil {
		return control.Stats{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, r.Options.CallTimeout)
	defer cancel()
	return c.Stats(cctx)
}

// sumUsage adds up the servers' statistics.
func sumUsage(stats map[int]control.Stats) *cachev1alpha1.Usage {
	var capacity, cached, dirty int64
	u := &cachev1alpha1.Usage{}
	var lag float64
	var timed control.Stats // the backing store's times, summed
	for _, st := range stats {
		capacity += st.CapacityBytes
		cached += st.CachedBytes
		dirty += st.DirtyBytes
		u.Hits += int64(st.Hits)
		u.Misses += int64(st.Misses)
		u.CopyUpBytes += st.CopyUpBytes
		u.WriteBackBytes += st.WriteBackBytes
		u.WindowBytesWritten += st.WindowBytesWritten
		lag = max(lag, st.WriteBackLagSeconds)
		timed.CopyUps, timed.CopyUpSeconds = timed.CopyUps+st.CopyUps, timed.CopyUpSeconds+st.CopyUpSeconds
		timed.WriteBacks, timed.WriteBackSeconds = timed.WriteBacks+st.WriteBacks, timed.WriteBackSeconds+st.WriteBackSeconds
	}
	if d, ok := timed.CopyUpLatency(); ok {
		u.CopyUpLatency = control.FormatLatency(d)
	}
	if d, ok := timed.WriteBackLatency(); ok {
		u.WriteBackLatency = control.FormatLatency(d)
	}
	u.Capacity = resource.NewQuantity(capacity, resource.BinarySI)
	u.Cached = resource.NewQuantity(cached, resource.BinarySI)
	u.Dirty = resource.NewQuantity(dirty, resource.BinarySI)
	u.WriteBackLagSeconds = int64(lag)
	if u.Hits+u.Misses > 0 {
		u.HitRatio = fmt.Sprintf("%.1f%%", 100*float64(u.Hits)/float64(u.Hits+u.Misses))
	}
	return u
}
