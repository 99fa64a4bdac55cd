package local

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSettingsReadBackWhatFreshWrote: the settings read from a state are
// those the state was made with, so that a restart can tell new flags that
// differ from them.
func TestSettingsReadBackWhatFreshWrote(t *testing.T) {
	base := Config{Backing: "/b", Mount: "/m", CacheDir: "/c", Servers: 3, Capacity: 3 << 30, ExtentSize: 4 << 20, UID: -1, GID: -1}
	tests := map[string]struct {
		edit func(*Config)
		want Settings
	}{
		"no identity": {
			edit: func(*Config) {},
			want: Settings{Servers: 3, Capacity: 1 << 30, ExtentSize: 4 << 20, UID: -1, GID: -1},
		},
		"identity and server flags": {
			edit: func(c *Config) { c.UID, c.GID, c.ServerArgs = 1000, 0, []string{"--dirty-high=80", "--uid=7"} },
			want: Settings{Servers: 3, Capacity: 1 << 30, ExtentSize: 4 << 20, UID: 1000, GID: 0, ServerArgs: []string{"--dirty-high=80", "--uid=7"}},
		},
		"acting as the caller": {
			edit: func(c *Config) { c.Servers, c.ActAsCaller, c.GID = 1, true, 5 },
			want: Settings{Servers: 1, Capacity: 3 << 30, ExtentSize: 4 << 20, UID: -1, GID: 5, ActAsCaller: true},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := base
			cfg.CacheDir = t.TempDir()
			tc.edit(&cfg)
			st, err := fresh(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, st.Settings()); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
		})
	}
}
