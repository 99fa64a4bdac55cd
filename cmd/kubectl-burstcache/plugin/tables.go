package plugin

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

func (e *env) poolsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pools",
		Short: "List cache pools: nodes, capacity, free capacity and instances",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var list cachev1alpha1.CachePoolList
			if err := e.client.List(cmd.Context(), &list); err != nil {
				return fmt.Errorf("listing CachePools: %w", err)
			}
			return e.print(poolTable(list.Items))
		},
	}
	e.addOutputFlag(cmd)
	return cmd
}

func poolTable(pools []cachev1alpha1.CachePool) table {
	t := table{header: []string{"NAME", "NODES", "CAPACITY", "FREE", "GRANULARITY", "INSTANCES"}, value: pools}
	for _, p := range pools {
		t.rows = append(t.rows, []string{
			p.Name, strconv.Itoa(len(p.Status.Nodes)), quantity(p.Status.TotalCapacity), quantity(p.Status.FreeCapacity),
			p.Spec.AllocationGranularity.String(), strconv.Itoa(int(p.Status.Instances)),
		})
	}
	return t
}

func (e *env) instancesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "instances",
		Aliases: []string{"instance"},
		Short:   "List cache instances: phase, pool, capacity, servers, dirty data and hit ratio",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			items, err := e.instances(cmd.Context())
			if err != nil {
				return err
			}
			return e.print(instanceTable(items))
		},
	}
	e.addOutputFlag(cmd)
	e.addAllNamespacesFlag(cmd)
	return cmd
}

func instanceTable(items []cachev1alpha1.CacheInstance) table {
	t := table{header: []string{"NAMESPACE", "NAME", "PHASE", "POOL", "CAPACITY", "SERVERS", "DIRTY", "HIT RATIO", "BACKING"}, value: items}
	for _, in := range items {
		dirty, ratio := "-", "-"
		if u := in.Status.Usage; u != nil {
			dirty, ratio = quantity(u.Dirty), orDash(u.HitRatio)
		}
		backing := "-"
		if in.Spec.Backing != nil {
			backing = string(in.Spec.Backing.Path)
		}
		t.rows = append(t.rows, []string{
			in.Namespace, in.Name, orDash(string(in.Status.Phase)), in.Spec.Pool, in.Spec.Capacity.String(),
			fmt.Sprintf("%d/%d", in.Status.ReadyServers, len(in.Status.Servers)), dirty, ratio, backing,
		})
	}
	return t
}

// serverRow is one server in `servers`.
type serverRow struct {
	Namespace string `json:"namespace"`
	Instance  string `json:"instance"`
	cachev1alpha1.ServerStatus
}

func (e *env) serversCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "servers [INSTANCE]",
		Short: "List the cache servers of the instances, or of one: pod, node, endpoint, capacity, readiness",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			items, err := e.instances(cmd.Context(), args...)
			if err != nil {
				return err
			}
			return e.print(serverTable(items))
		},
	}
	e.addOutputFlag(cmd)
	e.addAllNamespacesFlag(cmd)
	return cmd
}

func serverTable(items []cachev1alpha1.CacheInstance) table {
	rows := []serverRow{}
	t := table{header: []string{"NAMESPACE", "INSTANCE", "SERVER", "POD", "NODE", "ENDPOINT", "CAPACITY", "READY", "DIRTY"}}
	for _, in := range items {
		for _, s := range in.Status.Servers {
			rows = append(rows, serverRow{Namespace: in.Namespace, Instance: in.Name, ServerStatus: s})
			t.rows = append(t.rows, []string{
				in.Namespace, in.Name, s.Name, orDash(s.Pod), orDash(s.Node), orDash(s.Endpoint), quantity(s.Capacity), strconv.FormatBool(s.Ready), quantity(s.Dirty),
			})
		}
	}
	t.value = rows
	return t
}

// usageRow is one instance in `usage`.
type usageRow struct {
	Namespace string               `json:"namespace"`
	Instance  string               `json:"instance"`
	Usage     *cachev1alpha1.Usage `json:"usage"`
}

func (e *env) usageCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "usage [INSTANCE]",
		Short: "Show what the instances' servers hold and have done: cached, dirty, hits, copy-up, write-back, write window",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			items, err := e.instances(cmd.Context(), args...)
			if err != nil {
				return err
			}
			return e.print(usageTable(items))
		},
	}
	e.addOutputFlag(cmd)
	e.addAllNamespacesFlag(cmd)
	return cmd
}

func usageTable(items []cachev1alpha1.CacheInstance) table {
	rows := []usageRow{}
	t := table{header: []string{"NAMESPACE", "INSTANCE", "CAPACITY", "CACHED", "DIRTY", "HITS", "MISSES", "HIT RATIO", "COPY-UP", "WRITE-BACK", "WINDOW", "LAG", "PFS-READ", "PFS-WRITE"}}
	for _, in := range items {
		u := in.Status.Usage
		rows = append(rows, usageRow{Namespace: in.Namespace, Instance: in.Name, Usage: u})
		if u == nil {
			t.rows = append(t.rows, []string{in.Namespace, in.Name, "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-"})
			continue
		}
		t.rows = append(t.rows, []string{
			in.Namespace, in.Name, quantity(u.Capacity), quantity(u.Cached), quantity(u.Dirty),
			strconv.FormatInt(u.Hits, 10), strconv.FormatInt(u.Misses, 10), orDash(u.HitRatio),
			bytes(u.CopyUpBytes), bytes(u.WriteBackBytes), bytes(u.WindowBytesWritten), fmt.Sprintf("%ds", u.WriteBackLagSeconds),
			orDash(u.CopyUpLatency), orDash(u.WriteBackLatency),
		})
	}
	t.value = rows
	return t
}

// addAllNamespacesFlag adds -A to a command that lists instances.
func (e *env) addAllNamespacesFlag(cmd *cobra.Command) {
	cmd.Flags().BoolVarP(&e.allNamespaces, "all-namespaces", "A", false, "list the instances of every namespace")
}

// instances returns the named instance, or those of the namespace (or of
// every namespace with -A).
func (e *env) instances(ctx context.Context, name ...string) ([]cachev1alpha1.CacheInstance, error) {
	if len(name) == 1 {
		in := cachev1alpha1.CacheInstance{}
		if err := e.client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name[0]}, &in); err != nil {
			return nil, fmt.Errorf("reading CacheInstance %s/%s: %w", e.ns, name[0], err)
		}
		return []cachev1alpha1.CacheInstance{in}, nil
	}
	var opts []client.ListOption
	if !e.allNamespaces {
		opts = append(opts, client.InNamespace(e.ns))
	}
	var list cachev1alpha1.CacheInstanceList
	if err := e.client.List(ctx, &list, opts...); err != nil {
		return nil, fmt.Errorf("listing CacheInstances: %w", err)
	}
	return list.Items, nil
}
