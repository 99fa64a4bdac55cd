package plugin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// hintFlags are the flags of the hint commands.
type hintFlags struct {
	wait          bool
	timeout, poll time.Duration
}

var hintShort = map[cachev1alpha1.RequestOperation]string{
	cachev1alpha1.RequestFlush:      "Write back the dirty data under PATH (all of the instance without PATH), showing progress",
	cachev1alpha1.RequestEvict:      "Write back, then drop the cached data under PATH, freeing its space",
	cachev1alpha1.RequestInvalidate: "Forget the clean cached data under PATH, to see changes made to the backing file system directly",
	cachev1alpha1.RequestPreload:    "Copy the files under PATH up from the backing file system, showing progress",
}

func (e *env) hintCmd(op cachev1alpha1.RequestOperation) *cobra.Command {
	var f hintFlags
	cmd := &cobra.Command{
		Use:   string(op) + " INSTANCE [PATH]",
		Short: hintShort[op],
		Long: hintShort[op] + `.

PATH is relative to the instance's root (spec.backing.path), or an absolute
path under it. The request goes through the Kubernetes API: it needs the right
to patch the CacheInstance.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			p := ""
			if len(args) == 2 {
				p = args[1]
			}
			return e.runHint(cmd.Context(), op, args[0], p, f)
		},
	}
	cmd.Flags().BoolVar(&f.wait, "wait", true, "wait until the servers ran the request")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 0, "give up waiting after this long (0: wait until the request ends)")
	cmd.Flags().DurationVar(&f.poll, "poll-interval", time.Second, "how often to read the request's progress")
	return cmd
}

// runHint writes the request on the instance and follows it.
func (e *env) runHint(ctx context.Context, op cachev1alpha1.RequestOperation, name, p string, f hintFlags) error {
	inst := &cachev1alpha1.CacheInstance{}
	if err := e.client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, inst); err != nil {
		return fmt.Errorf("reading CacheInstance %s/%s: %w", e.ns, name, err)
	}
	if err := checkRequestPath(p); err != nil {
		return err
	}
	req := cachev1alpha1.RequestSpec{ID: newID(op), Operation: op, Path: relativePath(inst, p)}
	if err := e.sendRequest(ctx, inst, req); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(e.out, "%s: request %s sent to %s/%s\n", op, req.ID, inst.Namespace, inst.Name)
	if !f.wait {
		return nil
	}
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}
	return e.follow(ctx, inst, req, f.poll)
}

// sendRequest writes the request annotation with a merge patch: it touches
// nothing else of the instance, and needs only the right to patch it.
func (e *env) sendRequest(ctx context.Context, inst *cachev1alpha1.CacheInstance, req cachev1alpha1.RequestSpec) error {
	value, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encoding the request: %w", err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{cachev1alpha1.AnnotationRequest: string(value)},
	}})
	if err != nil {
		return fmt.Errorf("encoding the patch: %w", err)
	}
	if err := e.client.Patch(ctx, inst, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("asking %s/%s for %s: %w", inst.Namespace, inst.Name, req.Operation, err)
	}
	return nil
}

// follow prints a progress line whenever the request's progress changes,
// until it ends. A request that failed is an error with the reason.
func (e *env) follow(ctx context.Context, inst *cachev1alpha1.CacheInstance, req cachev1alpha1.RequestSpec, every time.Duration) error {
	tick := time.NewTicker(every)
	defer tick.Stop()
	last := ""
	phase := cachev1alpha1.RequestPending
	for {
		cur := &cachev1alpha1.CacheInstance{}
		if err := e.client.Get(ctx, client.ObjectKeyFromObject(inst), cur); err != nil {
			if ctx.Err() != nil {
				return stoppedWaiting(req, phase, ctx.Err())
			}
			return fmt.Errorf("reading the request's progress: %w", err)
		}
		st := cur.Status.LastRequest
		if st == nil || st.ID != req.ID {
			st = &cachev1alpha1.RequestStatus{ID: req.ID, Phase: cachev1alpha1.RequestPending, Message: "waiting for the operator to take the request"}
		}
		phase = st.Phase
		if line := progressLine(req, st, cur.Status.Usage); line != last {
			_, _ = fmt.Fprintln(e.out, line)
			last = line
		}
		switch st.Phase {
		case cachev1alpha1.RequestSucceeded:
			return nil
		case cachev1alpha1.RequestFailed:
			return fmt.Errorf("%s request %s failed: %s", req.Operation, req.ID, st.Message)
		}
		select {
		case <-ctx.Done():
			return stoppedWaiting(req, phase, ctx.Err())
		case <-tick.C:
		}
	}
}

// stoppedWaiting is the error of a follow that gave up, at the --timeout
// or an interrupt: the request itself goes on.
func stoppedWaiting(req cachev1alpha1.RequestSpec, phase cachev1alpha1.RequestPhase, err error) error {
	return fmt.Errorf("stopped waiting for %s request %s in phase %s; it goes on, and the instance's status.lastRequest shows how it ends: %w",
		req.Operation, req.ID, phase, err)
}

// progressLine says where a request is. A flush also says how much dirty
// data is left: the instance's until the servers report on the request,
// then what the request itself has left. A preload says how much it copied
// up of how much, once the servers know the total.
func progressLine(req cachev1alpha1.RequestSpec, st *cachev1alpha1.RequestStatus, u *cachev1alpha1.Usage) string {
	line := fmt.Sprintf("%s %s: %s", req.Operation, orDash(req.Path), st.Phase)
	if req.Operation == cachev1alpha1.RequestPreload && st.BytesTotal > 0 {
		line += fmt.Sprintf(", copied up %s of %s (%d%%)", bytes(st.BytesDone), bytes(st.BytesTotal), 100*st.BytesDone/st.BytesTotal)
	}
	if req.Operation == cachev1alpha1.RequestFlush {
		var dirty int64
		if u != nil && u.Dirty != nil {
			dirty = u.Dirty.Value()
		}
		if req.Path == "" && st.Phase != cachev1alpha1.RequestPending {
			dirty = st.BytesRemaining
		}
		line += ", dirty " + bytes(dirty)
	}
	if st.Message != "" {
		line += ": " + st.Message
	}
	return line
}

// relativePath turns an absolute path under the instance's backing path
// into one relative to the instance root. Anything else is passed on as
// given; the API refuses paths that leave the instance.
func relativePath(inst *cachev1alpha1.CacheInstance, p string) string {
	if !strings.HasPrefix(p, "/") || inst.Spec.Backing == nil {
		return p
	}
	root := path.Clean(string(inst.Spec.Backing.Path))
	c := path.Clean(p)
	if c == root {
		return ""
	}
	if rest, ok := strings.CutPrefix(c, strings.TrimSuffix(root, "/")+"/"); ok {
		return rest
	}
	return p
}

// checkRequestPath refuses a path that a request cannot carry. The
// Kubernetes API holds only UTF-8 text: a name of other bytes (Latin-1 from
// an older system, say) would reach the servers with U+FFFD in their place,
// and name another file. A NUL byte ends a name in every system call.
func checkRequestPath(p string) error {
	if !utf8.ValidString(p) {
		return fmt.Errorf("PATH %q is not valid UTF-8, which a request through the Kubernetes API cannot carry without naming another file: give a directory above it", p)
	}
	if strings.ContainsRune(p, 0) {
		return fmt.Errorf("PATH %q contains a NUL byte, which no file name holds", p)
	}
	return nil
}

// newID returns a request id that no other request of the instance has.
func newID(op cachev1alpha1.RequestOperation) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%s-%s", op, time.Now().UTC().Format("20060102t150405"), hex.EncodeToString(b))
}
