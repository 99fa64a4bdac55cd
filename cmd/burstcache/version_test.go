package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestVersionPrintsVersionAndCommit(t *testing.T) {
	oldVersion, oldCommit := version, commit
	t.Cleanup(func() { version, commit = oldVersion, oldCommit })
	version, commit = "v1.2.3", "abc123"

	var out bytes.Buffer
	root := newRootCmd()
	root.SetOut(&out)
	root.SetArgs([]string{"version"})
	if err := root.Execute(); err != nil {
		t.Fatalf("version: %v", err)
	}
	if got := out.String(); !strings.HasPrefix(got, "burstcache v1.2.3 (commit abc123,") {
		t.Errorf("version output = %q, want it to start with the version and commit", got)
	}
}

func TestUnknownSubcommandFails(t *testing.T) {
	root := newRootCmd()
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"no-such-command"})
	if err := root.Execute(); err == nil {
		t.Fatal("an unknown subcommand succeeded, want an error")
	}
}
