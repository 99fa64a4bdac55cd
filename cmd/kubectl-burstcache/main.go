// Command kubectl-burstcache is the kubectl plugin of burstcache
// (`kubectl burstcache`): it shows pools, instances, servers and usage the
// way DataWarp's dwstat does, and asks for user hints (flush, evict,
// invalidate, preload) through the Kubernetes API, as dwcli does.
package main

import (
	"os"

	"github.com/burstcache/burstcache/cmd/kubectl-burstcache/plugin"
)

func main() {
	os.Exit(plugin.Main(os.Args[1:], os.Stdout, os.Stderr))
}
