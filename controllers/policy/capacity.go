package policy

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// Allocation is how an instance's capacity is laid out over servers.
type Allocation struct {
	// Units is the capacity in allocation granularities, rounded up.
	Units int64
	// Servers is the number of servers: one per unit, at most one per node.
	Servers int
	// PerServer is the capacity of each server in bytes.
	PerServer int64
}

// Total is the capacity the instance takes from the pool, in bytes.
func (a Allocation) Total() int64 { return a.PerServer * int64(a.Servers) }

// Allocate lays an instance of the pool out over at most nodes servers:
// ceil(capacity / granularity) units, one server per unit and node. With
// fewer nodes than units each server takes several units. nodes < 1 yields
// one server.
func Allocate(inst *cachev1alpha1.CacheInstance, pool *cachev1alpha1.CachePool, nodes int) Allocation {
	gran := pool.Spec.AllocationGranularity.Value()
	if gran <= 0 {
		gran = 1
	}
	units := max((inst.Spec.Capacity.Value()+gran-1)/gran, 1)
	servers := int(min(units, int64(max(nodes, 1))))
	perServer := (units + int64(servers) - 1) / int64(servers) * gran
	return Allocation{Units: units, Servers: servers, PerServer: perServer}
}

// Allocated reports whether an instance holds capacity of its pool: from the
// moment its servers are placed until they are deleted.
func Allocated(inst *cachev1alpha1.CacheInstance) bool {
	return len(inst.Status.Servers) > 0
}

// Reserved sums the capacity the allocated instances of a pool hold, in
// bytes, from the capacity their servers report in status.
func Reserved(instances []cachev1alpha1.CacheInstance) int64 {
	var sum int64
	for i := range instances {
		for _, s := range instances[i].Status.Servers {
			if s.Capacity != nil {
				sum += s.Capacity.Value()
			}
		}
	}
	return sum
}

// checkTotalCapacity refuses an instance that even an empty pool could not
// hold: more than capacityPerNode on each of the pool's nodes.
func checkTotalCapacity(inst *cachev1alpha1.CacheInstance, pool *cachev1alpha1.CachePool) Violations {
	if pool.Status.TotalCapacity == nil {
		return nil
	}
	a := Allocate(inst, pool, len(pool.Status.Nodes))
	if a.PerServer <= pool.Spec.Media.CapacityPerNode.Value() && a.Total() <= pool.Status.TotalCapacity.Value() {
		return nil
	}
	return Violations{{Reason: cachev1alpha1.ReasonInsufficientCapacity, Field: "spec.capacity",
		Message: fmt.Sprintf("%s (rounded to %s) does not fit in the pool's total capacity %s on %d nodes of %s",
			inst.Spec.Capacity.String(), bytes(a.Units*pool.Spec.AllocationGranularity.Value()),
			pool.Status.TotalCapacity.String(), len(pool.Status.Nodes), pool.Spec.Media.CapacityPerNode.String())}}
}

// Fits reports whether an allocation fits into free bytes, with a
// violation that says why not.
func Fits(a Allocation, free int64) Violations {
	if a.Total() <= free {
		return nil
	}
	return Violations{{Reason: cachev1alpha1.ReasonInsufficientCapacity, Field: "spec.capacity",
		Message: fmt.Sprintf("the instance needs %s but the pool has %s free", bytes(a.Total()), bytes(free))}}
}

func bytes(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}
