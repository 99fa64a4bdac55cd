package hint

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"time"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/cacheserver/control"
)

// Target is one server a request runs on.
type Target struct {
	// Name identifies the server in errors, such as "server-0".
	Name string
	// Client calls the server's control API. Its HTTP client must not time
	// out calls by itself: a flush takes as long as it takes, bounded by the
	// Runner's Timeout.
	Client *control.Client
}

// State is where a request started with Start is.
type State int

// States of a request in a Runner.
const (
	// Absent means the runner knows nothing of the request: it was never
	// started, its outcome was taken, or the manager restarted.
	Absent State = iota
	// Running means some server has not answered yet; Outcome.Bytes says
	// what the servers that answered preloaded so far, and
	// Outcome.Requests what runs.
	Running
	// Done means every server answered; Outcome says how it went.
	Done
)

// Outcome is how a request ended on all servers.
type Outcome struct {
	// Remaining is the dirty data left on all servers after a flush of the
	// whole instance.
	Remaining int64
	// Bytes is what the preload calls that ended well hold in all: each
	// server's share of each path, now in its cache. A running preload's
	// progress is Bytes plus what the servers' stats count.
	Bytes int64
	// Err joins the servers' errors; nil when all succeeded.
	Err error
	// Requests are the requests the job ran, as StartAll was given them.
	Requests []cachev1alpha1.RequestSpec
}

// Runner runs requests on servers in the background, at most one per key.
// Its methods may be called concurrently.
type Runner struct {
	// Timeout bounds one attempt on one server.
	Timeout time.Duration

	base context.Context
	mu   sync.Mutex
	jobs map[string]*job
}

type job struct {
	done   chan struct{}
	cancel context.CancelFunc
	// mu guards outcome while the job runs.
	mu      sync.Mutex
	outcome Outcome
}

// NewRunner returns a runner whose requests end when ctx does.
func NewRunner(ctx context.Context, timeout time.Duration) *Runner {
	return &Runner{Timeout: timeout, base: ctx, jobs: map[string]*job{}}
}

// Start runs req on every target under key, unless a request runs under
// key already.
func (r *Runner) Start(key string, req cachev1alpha1.RequestSpec, targets []Target) {
	r.StartAll(key, []cachev1alpha1.RequestSpec{req}, targets)
}

// StartAll runs reqs one after the other on every target under key, the
// targets at once, unless a request runs under key already. A target stops
// at its first failure.
func (r *Runner) StartAll(key string, reqs []cachev1alpha1.RequestSpec, targets []Target) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.jobs[key]; ok {
		return
	}
	ctx, cancel := context.WithCancel(r.base)
	j := &job{done: make(chan struct{}), cancel: cancel, outcome: Outcome{Requests: slices.Clone(reqs)}}
	r.jobs[key] = j
	go func() {
		defer close(j.done)
		defer cancel()
		r.run(ctx, j, reqs, targets)
	}()
}

// Cancel ends the request that runs under key, if any: its calls to the
// servers are cancelled, which ends what they do, and the request is Done
// with their errors. A request that would run for nothing, as a preload of
// paths the instance no longer asks for, or of an instance going away,
// then leaves the servers' disks to what they are asked now.
func (r *Runner) Cancel(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if j, ok := r.jobs[key]; ok {
		j.cancel()
	}
}

// Drop cancels the request under key, as Cancel does, and forgets it: its
// outcome is of no use to anyone, as that of a preload an instance no
// longer asks for, or of an instance being deleted.
func (r *Runner) Drop(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if j, ok := r.jobs[key]; ok {
		j.cancel()
		delete(r.jobs, key)
	}
}

// Poll says where the request under key is. A Done outcome is handed out
// once; the key is then Absent again, so that a retry can Start it anew.
func (r *Runner) Poll(key string) (State, Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	j, ok := r.jobs[key]
	if !ok {
		return Absent, Outcome{}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	select {
	case <-j.done:
		delete(r.jobs, key)
		return Done, j.outcome
	default:
		return Running, Outcome{Bytes: j.outcome.Bytes, Requests: j.outcome.Requests}
	}
}

// run calls every server at once and waits for all of them, adding what
// each call returns to the job's outcome as it returns.
func (r *Runner) run(ctx context.Context, j *job, reqs []cachev1alpha1.RequestSpec, targets []Target) {
	var wg sync.WaitGroup
	for _, t := range targets {
		wg.Go(func() {
			for _, req := range reqs {
				res, err := r.attempt(ctx, t, req)
				j.mu.Lock()
				j.outcome.Remaining += res.Remaining
				j.outcome.Bytes += res.Bytes
				if err != nil {
					j.outcome.Err = errors.Join(j.outcome.Err, fmt.Errorf("%s: %s %q: %w", t.Name, req.Operation, req.Path, err))
				}
				j.mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
}

// attempt runs req on one target, within the runner's Timeout.
func (r *Runner) attempt(ctx context.Context, t Target, req cachev1alpha1.RequestSpec) (Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	return call(ctx, t.Client, req)
}

// call runs req on one server; the outcome holds what the server answered.
func call(ctx context.Context, c *control.Client, req cachev1alpha1.RequestSpec) (Outcome, error) {
	switch req.Operation {
	case cachev1alpha1.RequestFlush:
		if req.Path == "" {
			res, err := c.Flush(ctx)
			return Outcome{Remaining: res.RemainingBytes}, err
		}
		return Outcome{}, c.FlushPath(ctx, req.Path)
	case cachev1alpha1.RequestEvict:
		return Outcome{}, c.EvictPath(ctx, req.Path)
	case cachev1alpha1.RequestInvalidate:
		return Outcome{}, c.InvalidatePath(ctx, req.Path)
	case cachev1alpha1.RequestPreload:
		res, err := c.Preload(ctx, req.Path)
		return Outcome{Bytes: res.Bytes}, err
	}
	return Outcome{}, fmt.Errorf("%w: operation %q", ErrInvalid, req.Operation)
}

// Final reports whether err means the request cannot succeed as written,
// so that trying again would not help: it is malformed, or its path is
// missing or not readable by the instance's identity. Other errors (a
// server down) may pass and are retried. A flush is always retried: its
// data is dirty and must reach the backing file system, whose permissions
// an administrator may fix.
func Final(op cachev1alpha1.RequestOperation, err error) bool {
	if errors.Is(err, ErrInvalid) {
		return true
	}
	if op == cachev1alpha1.RequestFlush {
		return false
	}
	for _, e := range []error{syscall.ENOENT, syscall.ENOTDIR, syscall.EINVAL, syscall.EACCES, syscall.EPERM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
