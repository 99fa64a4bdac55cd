// Command workload is the job the end-to-end suite runs in its pods: it
// writes, reads and checks files through a burstcache mount and exits non-zero
// with the error on the first thing that is not as it should be. It has no
// shell and needs none.
//
//	workload write DIR COUNT SIZE    write COUNT files of SIZE bytes, fsync, reread and check them
//	workload verify DIR COUNT SIZE   check COUNT files of SIZE bytes
//	workload cat FILE                copy FILE to stdout
//	workload churn DIR SECONDS       write, reread and delete files in a loop for SECONDS
//	workload sleep SECONDS           sleep
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "workload:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: workload write|verify|cat|churn|sleep ARGS")
	}
	n := func(i int) int {
		v, err := strconv.Atoi(arg(args, i))
		if err != nil {
			fmt.Fprintln(os.Stderr, "workload: argument", i, "is not a number")
			os.Exit(2)
		}
		return v
	}
	switch args[0] {
	case "write":
		return write(arg(args, 1), n(2), n(3))
	case "verify":
		return verify(arg(args, 1), n(2), n(3))
	case "cat":
		return cat(arg(args, 1))
	case "churn":
		return churn(arg(args, 1), time.Duration(n(2))*time.Second)
	case "sleep":
		time.Sleep(time.Duration(n(1)) * time.Second)
		return nil
	}
	return fmt.Errorf("unknown command %q", args[0])
}

func arg(args []string, i int) string {
	if i >= len(args) {
		return ""
	}
	return args[i]
}
