// Command pause is the sandbox ("pause") container of the local cluster
// (hack/local-cluster.sh): it holds a pod's namespaces open by sleeping until
// it is told to stop, and, running as PID 1 of a pod that shares its process
// namespace, reaps the zombies its adopted children leave. It is built
// statically and packed by hack/image, since no registry can be reached.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (burstcache local cluster)")
		return
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every child that has exited, without blocking.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
