// Command burstcache is the single binary of burstcache. Its subcommands run the
// cache server, the FUSE client, a standalone local cache, the Kubernetes
// manager and the CSI driver.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "burstcache:", err)
		os.Exit(exitCode(err))
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "burstcache",
		Short: "A transparent SSD write-back cache in front of a parallel file system",
		Long: `burstcache gives batch jobs an ephemeral, SSD-backed, transparent write-back
cache in front of a parallel file system. Reads copy up from the backing file
system, writes land on SSD and are written back to the same files.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newVersionCmd(),
		newServerCmd(),
		newMountCmd(),
		newLocalCmd(),
		newManagerCmd(),
		newCSICmd(),
	)
	return root
}

// exitStatus is an error that carries the process exit code to use for it.
type exitStatus interface {
	ExitCode() int
}

// exitCode maps an error to the process exit code: errors that carry their own
// code keep it, everything else exits 1.
func exitCode(err error) int {
	if es, ok := err.(exitStatus); ok {
		return es.ExitCode()
	}
	return 1
}
