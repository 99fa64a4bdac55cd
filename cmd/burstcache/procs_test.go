package main

import (
	"runtime"
	"testing"
)

func TestRaiseProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	t.Setenv("GOMAXPROCS", "")
	runtime.GOMAXPROCS(1)
	raiseProcs()
	if n := runtime.GOMAXPROCS(0); n != mountProcs {
		t.Fatalf("GOMAXPROCS after raiseProcs from 1: %d, want %d", n, mountProcs)
	}
	runtime.GOMAXPROCS(mountProcs + 3)
	raiseProcs()
	if n := runtime.GOMAXPROCS(0); n != mountProcs+3 {
		t.Fatalf("raiseProcs lowered GOMAXPROCS to %d", n)
	}
	t.Setenv("GOMAXPROCS", "1")
	runtime.GOMAXPROCS(1)
	raiseProcs()
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Fatalf("raiseProcs overrode GOMAXPROCS=1 from the environment: %d", n)
	}
}
