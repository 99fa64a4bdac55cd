package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/burstcache/burstcache/cacheserver/local"
)

// settingFlag is a flag of local up that sets what an instance keeps for
// its life (local.Settings), with its value as given and as stored.
type settingFlag struct {
	name          string
	given, stored string
	// keeper says what keeps the stored value.
	keeper string
}

const serversKeep = "its servers keep it, to recover the data they hold"

// checkStoredSettings refuses a flag given explicitly whose value differs
// from the one the instance in the cache directory was started with. Up
// over that instance starts its servers again with their stored
// arguments, to recover the data they hold, and would ignore the flag: an
// identity given anew would silently not be the one the servers take.
// --client-cache is held to the running mount, which up leaves as it is.
// Flags left out keep the stored values, and an instance of another mount
// point or backing directory is left to local.Up to refuse.
func checkStoredSettings(cmd *cobra.Command, cfg local.Config) error {
	dir := cfg.CacheDir
	if dir == "" {
		dir = local.DefaultCacheDir(cfg.Mount)
	}
	st, err := local.LoadDir(dir)
	if errors.Is(err, local.ErrNotUp) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Mount != cfg.Mount || st.Backing != cfg.Backing {
		return nil
	}
	flags := settingFlags(cfg, st.Settings())
	if st.MountRunning(cfg.Binary) {
		// Up keeps a running mount as it is.
		running := slices.Contains(st.MountArgs, "--client-cache")
		flags = append(flags, settingFlag{"client-cache", strconv.FormatBool(cfg.ClientCache), strconv.FormatBool(running), "its mount runs with it"})
	}
	for _, f := range flags {
		if cmd.Flags().Changed(f.name) && f.given != f.stored {
			return badInput("--%s %s differs from %s, which the instance in %s was started with: "+
				"%s. Omit --%s to start the instance again as it was; "+
				"to change it, first write the instance's data back with `burstcache local down --mount %s` "+
				"(after a `local up` without --%s, if its servers are not running)",
				f.name, f.given, f.stored, st.CacheDir, f.keeper, f.name, st.Mount, f.name)
		}
	}
	return nil
}

// settingFlags pairs each setting flag's value in cfg with the stored one.
func settingFlags(cfg local.Config, stored local.Settings) []settingFlag {
	servers := int64(max(stored.Servers, 1))
	return []settingFlag{
		{"servers", strconv.Itoa(max(cfg.Servers, 1)), strconv.Itoa(stored.Servers), serversKeep},
		// Each server has its share; a total that gives the same share is
		// the same capacity.
		{"capacity", capacityShare(cfg.Capacity, servers), capacityShare(stored.Capacity*servers, servers), serversKeep},
		{"extent-size", strconv.FormatInt(cfg.ExtentSize, 10), strconv.FormatInt(stored.ExtentSize, 10), serversKeep},
		{"uid", idValue(cfg.UID), idValue(stored.UID), serversKeep},
		{"gid", idValue(cfg.GID), idValue(stored.GID), serversKeep},
		{"act-as-caller", strconv.FormatBool(cfg.ActAsCaller), strconv.FormatBool(stored.ActAsCaller), serversKeep},
		{"server-arg", argsValue(cfg.ServerArgs), argsValue(stored.ServerArgs), serversKeep},
	}
}

func capacityShare(total, servers int64) string {
	return fmt.Sprintf("%d bytes (%d per server)", total/servers*servers, total/servers)
}

func idValue(id int) string {
	if id < 0 {
		return "none"
	}
	return strconv.Itoa(id)
}

func argsValue(args []string) string {
	if len(args) == 0 {
		return "none"
	}
	return fmt.Sprintf("%q", strings.Join(args, ","))
}
