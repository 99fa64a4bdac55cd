package local

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/burstcache/burstcache/cacheserver/control"
)

// ServerStatus is one server as Status sees it.
type ServerStatus struct {
	ServerState
	Alive bool
	Stats control.Stats
	Err   error
}

// Status asks every server for its statistics.
func Status(ctx context.Context, bin string, st *State) []ServerStatus {
	hc := &http.Client{Timeout: 5 * time.Second}
	var out []ServerStatus
	for _, s := range st.Servers {
		ss := ServerStatus{ServerState: s, Alive: alive(s.PID, s.Start, bin)}
		var c *control.Client
		if c, ss.Err = st.controlClient(s, hc); ss.Err == nil {
			ss.Stats, ss.Err = c.Stats(ctx)
		}
		out = append(out, ss)
	}
	return out
}

// PrintStatus writes a table of the servers and the instance's totals, like
// DataWarp's dwstat. PFS-READ and PFS-WRITE are the mean times one extent
// took to copy up from the backing directory and to write back to it: when
// first reads or a teardown are slow, they say whether the backing file
// system is.
func PrintStatus(w io.Writer, st *State, mountAlive bool, ss []ServerStatus) {
	_, _ = fmt.Fprintf(w, "mount %s (%s)  backing %s  cache %s\n", st.Mount, upDown(mountAlive), st.Backing, st.CacheDir)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "SERVER\tADDRESS\tPID\tSTATE\tCAPACITY\tCACHED\tDIRTY\tHITS\tMISSES\tHIT%\tWB-LAG\tWB-ERRORS\tPFS-READ\tPFS-WRITE")
	var total control.Stats
	for _, s := range ss {
		if s.Err != nil {
			_, _ = fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t-\t-\t-\t-\t-\t-\t-\t%v\t-\t-\n", s.Index, s.Data, s.PID, upDown(s.Alive), s.Err)
			continue
		}
		printRow(tw, fmt.Sprint(s.Index), s.Data, fmt.Sprint(s.PID), upDown(s.Alive), s.Stats)
		total = addStats(total, s.Stats)
	}
	printRow(tw, "total", "", "", "", total)
	_ = tw.Flush()
	for _, s := range ss {
		if s.Err == nil && s.Stats.CacheDeviceError != "" {
			_, _ = fmt.Fprintf(w, "server %d: %s: writes fail, dirty data is being written back\n", s.Index, s.Stats.CacheDeviceError)
		}
		switch {
		case s.Err != nil || !s.Stats.WriteBackFailing:
		case s.Stats.WriteBackRefused:
			_, _ = fmt.Fprintf(w, "server %d: the backing directory refuses the write-back (%s): writes that need cache space fail with its error until it has room\n", s.Index, s.Stats.LastWriteBackError)
		default:
			_, _ = fmt.Fprintf(w, "server %d: write-back keeps failing (%s); the dirty data stays cached and is retried\n", s.Index, s.Stats.LastWriteBackError)
		}
		if s.Err == nil && s.Stats.ReadOnly {
			_, _ = fmt.Fprintf(w, "server %d: read-only: %s written within the write window, which allows %s; writes fail with EROFS until the window moves on\n",
				s.Index, control.FormatBytes(s.Stats.WindowBytesWritten), control.FormatBytes(s.Stats.WindowLimitBytes))
		}
		if s.Err == nil && s.Stats.IndexError != "" {
			_, _ = fmt.Fprintf(w, "server %d: its index cannot be committed (%s): fsync fails, and so do writes that need freed space, until the cache directory's disk has room\n", s.Index, s.Stats.IndexError)
		}
	}
}

func printRow(w io.Writer, idx, addr, pid, state string, s control.Stats) {
	_, _ = fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%.1f\t%s\t%d\t%s\t%s\n", idx, addr, pid, state,
		control.FormatBytes(s.CapacityBytes), control.FormatBytes(s.CachedBytes), control.FormatBytes(s.DirtyBytes), s.Hits, s.Misses,
		100*s.HitRatio(), seconds(s.WriteBackLagSeconds).Round(time.Millisecond), s.WriteBackErrors,
		latency(s.CopyUpLatency()), latency(s.WriteBackLatency()))
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// latency formats d, or "-" when nothing was timed.
func latency(d time.Duration, ok bool) string {
	if !ok {
		return "-"
	}
	return control.FormatLatency(d)
}

func addStats(a, b control.Stats) control.Stats {
	a.CapacityBytes += b.CapacityBytes
	a.CachedBytes += b.CachedBytes
	a.DirtyBytes += b.DirtyBytes
	a.Hits += b.Hits
	a.Misses += b.Misses
	a.WriteBackLagSeconds = max(a.WriteBackLagSeconds, b.WriteBackLagSeconds)
	a.WriteBackErrors += b.WriteBackErrors
	a.CopyUps += b.CopyUps
	a.CopyUpSeconds += b.CopyUpSeconds
	a.WriteBacks += b.WriteBacks
	a.WriteBackSeconds += b.WriteBackSeconds
	return a
}

func upDown(ok bool) string {
	if ok {
		return "up"
	}
	return "DOWN"
}
