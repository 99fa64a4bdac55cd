package local

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMountinfoHas(t *testing.T) {
	info := `22 1 0:21 / / rw,relatime - ext4 /dev/root rw
35 22 0:45 / /tmp/a\040b rw,nosuid - fuse.burstcache burstcache rw
36 22 0:46 / /mnt/x rw - tmpfs tmpfs rw`
	tests := map[string]struct {
		dir  string
		want bool
	}{
		"mounted":             {"/mnt/x", true},
		"escaped space":       {"/tmp/a b", true},
		"parent of a mount":   {"/mnt", false},
		"not mounted":         {"/srv", false},
		"prefix of a mount":   {"/mnt/", false},
		"root is mounted too": {"/", true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := mountinfoHas(info, tc.dir); got != tc.want {
				t.Errorf("mountinfoHas(%q) = %v, want %v", tc.dir, got, tc.want)
			}
		})
	}
}

func TestPinnedKeepsAddresses(t *testing.T) {
	args := []string{"server", "--listen", "127.0.0.1:0", "--control", "127.0.0.1:0", "--index", "1"}
	tests := map[string]struct {
		s    ServerState
		want []string
	}{
		"never started": {ServerState{Args: args}, args},
		"started before": {
			ServerState{Args: args, Data: "127.0.0.1:4000", Control: "127.0.0.1:4001"},
			[]string{"server", "--listen", "127.0.0.1:4000", "--control", "127.0.0.1:4001", "--index", "1"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, pinned(&tc.s)); diff != "" {
				t.Errorf("pinned (-want +got):\n%s", diff)
			}
			if tc.s.Args[2] != "127.0.0.1:0" {
				t.Errorf("pinned changed the recorded arguments")
			}
		})
	}
}
