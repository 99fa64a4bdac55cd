package vfs

import (
	"errors"
	"testing"
)

func TestFailingCommitsFailOnlyWhileSet(t *testing.T) {
	errFull := errors.New("full")
	f := &FailingCommits{FS: OS{}, Err: errFull}
	ran := 0
	step := func() error { ran++; return nil }
	if err := f.Durable("one", step); err != nil || ran != 1 {
		t.Fatalf("before Fail: err = %v, ran %d times", err, ran)
	}
	f.Fail.Store(true)
	if err := f.Durable("two", step); !errors.Is(err, errFull) || ran != 1 {
		t.Fatalf("while Fail: err = %v, ran %d times; want %v without running", err, ran, errFull)
	}
	f.Fail.Store(false)
	if err := f.Durable("three", step); err != nil || ran != 2 {
		t.Fatalf("after Fail: err = %v, ran %d times", err, ran)
	}
}
