package policy

import (
	"fmt"
	"math"

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

// Total is the capacity the instance takes from the pool, in bytes,
// saturated at math.MaxInt64 as the other sums of bytes are.
func (a Allocation) Total() int64 { return MulBytes(a.PerServer, int64(a.Servers)) }

// Allocate lays an instance of the pool out over at most nodes servers:
// ceil(capacity / granularity) units, one server per unit and node. With
// fewer nodes than units each server takes several units. nodes < 1 yields
// one server. The rounding cannot wrap around: a capacity that cannot be
// counted in bytes counts as math.MaxInt64 (Validate refuses it), and
// PerServer saturates as Total does.
func Allocate(inst *cachev1alpha1.CacheInstance, pool *cachev1alpha1.CachePool, nodes int) Allocation {
	gran := pool.Spec.AllocationGranularity.Value()
	if gran <= 0 {
		gran = 1
	}
	units := max(ceilDiv(countBytes(inst.Spec.Capacity), gran), 1)
	servers := int(min(units, int64(max(nodes, 1))))
	perServer := MulBytes(ceilDiv(units, int64(servers)), gran)
	return Allocation{Units: units, Servers: servers, PerServer: perServer}
}

// ceilDiv is a/b rounded up for a >= 0 and b > 0. It divides before it
// rounds, where (a+b-1)/b would wrap around for a near math.MaxInt64.
func ceilDiv(a, b int64) int64 {
	return a/b + min(a%b, 1)
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
				sum = AddBytes(sum, countBytes(*s.Capacity))
			}
		}
	}
	return sum
}

// checkTotalCapacity refuses an instance that even an empty pool could not
// hold: more than capacityPerNode on each of the pool's nodes. The capacity
// is compared as a quantity before it is counted in bytes, since Value() of
// a quantity past math.MaxInt64 says nothing of its size.
func checkTotalCapacity(inst *cachev1alpha1.CacheInstance, pool *cachev1alpha1.CachePool) Violations {
	c := inst.Spec.Capacity
	if !countable(c) {
		return Violations{{Reason: cachev1alpha1.ReasonInsufficientCapacity, Field: "spec.capacity", Message: uncountable(c)}}
	}
	if pool.Status.TotalCapacity == nil {
		return nil
	}
	a := Allocate(inst, pool, len(pool.Status.Nodes))
	if c.Cmp(*pool.Status.TotalCapacity) <= 0 &&
		a.PerServer <= countBytes(pool.Spec.Media.CapacityPerNode) && a.Total() <= countBytes(*pool.Status.TotalCapacity) {
		return nil
	}
	return Violations{{Reason: cachev1alpha1.ReasonInsufficientCapacity, Field: "spec.capacity",
		Message: fmt.Sprintf("%s (rounded to %s) does not fit in the pool's total capacity %s on %d nodes of %s",
			c.String(), bytes(MulBytes(a.Units, pool.Spec.AllocationGranularity.Value())),
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

// TotalCapacity is the capacity of nodes nodes of the pool in bytes,
// saturated at math.MaxInt64: a total of nodes of several Ei each must not
// wrap around to a negative total and no free capacity.
func TotalCapacity(pool *cachev1alpha1.CachePool, nodes int) int64 {
	return MulBytes(countBytes(pool.Spec.Media.CapacityPerNode), int64(nodes))
}

// maxBytes is the most bytes a capacity can count. Capacities are added and
// multiplied as int64 bytes; the API server itself keeps no binary-suffixed
// quantity above it (it reads 12Ei as this), but decimal ones such as 1e30
// it keeps.
var maxBytes = resource.NewQuantity(math.MaxInt64, resource.BinarySI)

// countable reports whether q can be counted in int64 bytes. Value() of a
// larger quantity is no count of it: it saturates, wraps around (2^63) or
// is 0 (1e30). The comparison is of quantities, which cannot overflow.
func countable(q resource.Quantity) bool {
	return q.Cmp(*maxBytes) <= 0
}

// uncountable says why a quantity that countable refuses is refused.
func uncountable(q resource.Quantity) string {
	return fmt.Sprintf("%s is more than the %d bytes (8Ei less one byte) that a capacity can count", q.String(), int64(math.MaxInt64))
}

// countBytes is q in bytes, or math.MaxInt64 if it cannot be counted, so
// that arithmetic on a quantity that validation refuses still cannot make
// it small.
func countBytes(q resource.Quantity) int64 {
	if !countable(q) {
		return math.MaxInt64
	}
	return q.Value()
}

// AddBytes is a+b for byte counts a, b >= 0, saturated at math.MaxInt64.
func AddBytes(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// MulBytes is n times the byte count b, for b, n >= 0, saturated at
// math.MaxInt64.
func MulBytes(b, n int64) int64 {
	if n != 0 && b > math.MaxInt64/n {
		return math.MaxInt64
	}
	return b * n
}

func bytes(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}
