package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// fakeService records the calls it gets and fails as it is told.
type fakeService struct {
	mu        sync.Mutex
	calls     []string
	remaining int64
	err       error
	tunables  Tunables
	ready     bool
	givenBack []GivenBack
}

func (f *fakeService) record(call string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	return f.err
}

func (f *fakeService) Flush(context.Context) (int64, error) { return f.remaining, f.record("flush") }
func (f *fakeService) Drain(context.Context) (int64, error) { return f.remaining, f.record("drain") }
func (f *fakeService) Discard(context.Context) error        { return f.record("discard") }
func (f *fakeService) RemoveHidden(context.Context) (HiddenResult, error) {
	return HiddenResult{Removed: int(f.remaining), GivenBack: f.givenBack}, f.record("remove hidden")
}
func (f *fakeService) FlushPath(_ context.Context, p string) error {
	return f.record("flush " + p)
}
func (f *fakeService) EvictPath(_ context.Context, p string) error {
	return f.record("evict " + p)
}
func (f *fakeService) InvalidatePath(_ context.Context, p string) error {
	return f.record("invalidate " + p)
}
func (f *fakeService) Preload(_ context.Context, p string) (int64, error) {
	return f.remaining, f.record("preload " + p)
}
func (f *fakeService) Stats(context.Context) (Stats, error) {
	return Stats{Server: ServerInfo{Index: 1, Servers: 3}, Hits: 3, Misses: 1, DirtyBytes: 42}, f.record("stats")
}
func (f *fakeService) SetTunables(_ context.Context, t Tunables) error {
	f.tunables = t
	return f.record("tunables")
}
func (f *fakeService) Ready() bool { return f.ready }

func start(t *testing.T, svc *fakeService) *Client {
	t.Helper()
	srv := httptest.NewServer(NewHandler(svc, nil, nil))
	t.Cleanup(srv.Close)
	return NewClient(srv.URL, nil, nil)
}

func TestPathCallsReachTheService(t *testing.T) {
	ctx := context.Background()
	tests := map[string]struct {
		call     func(*Client) error
		svcErr   error
		want     string
		wantErrn error
	}{
		"flush path":      {call: func(c *Client) error { return c.FlushPath(ctx, "a/b") }, want: "flush a/b"},
		"evict":           {call: func(c *Client) error { return c.EvictPath(ctx, "a") }, want: "evict a"},
		"invalidate":      {call: func(c *Client) error { return c.InvalidatePath(ctx, "x") }, want: "invalidate x"},
		"discard":         {call: func(c *Client) error { return c.Discard(ctx) }, want: "discard"},
		"preload":         {call: func(c *Client) error { _, err := c.Preload(ctx, "y"); return err }, want: "preload y"},
		"errno preserved": {call: func(c *Client) error { _, err := c.Preload(ctx, "z"); return err }, svcErr: fmt.Errorf("open z: %w", syscall.ENOENT), want: "preload z", wantErrn: syscall.ENOENT},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			svc := &fakeService{err: tc.svcErr}
			err := tc.call(start(t, svc))
			if tc.wantErrn == nil && err != nil || tc.wantErrn != nil && !errors.Is(err, tc.wantErrn) {
				t.Fatalf("call: %v, want %v", err, tc.wantErrn)
			}
			if diff := cmp.Diff([]string{tc.want}, svc.calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFlushReportsWhatIsLeft(t *testing.T) {
	tests := map[string]struct {
		remaining  int64
		err        error
		want       FlushResult
		incomplete bool
	}{
		"complete":   {want: FlushResult{}},
		"incomplete": {remaining: 4096, err: fmt.Errorf("write back a: %w", syscall.ENOSPC), want: FlushResult{RemainingBytes: 4096, Error: "write back a: no space left on device"}, incomplete: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := start(t, &fakeService{remaining: tc.remaining, err: tc.err})
			for _, flush := range []func(context.Context) (FlushResult, error){c.Flush, c.Drain} {
				res, err := flush(context.Background())
				if diff := cmp.Diff(tc.want, res); diff != "" {
					t.Errorf("result (-want +got):\n%s", diff)
				}
				if errors.Is(err, ErrFlushIncomplete) != tc.incomplete || (err != nil) != tc.incomplete {
					t.Errorf("err = %v, want incomplete: %v", err, tc.incomplete)
				}
				if tc.incomplete && !errors.Is(err, syscall.ENOSPC) {
					t.Errorf("err = %v, want ENOSPC", err)
				}
			}
		})
	}
}

// TestRemoveHiddenReportsWhatItRemoved: the count and the files given
// their names back come back with success and with a failure, which keeps
// its errno. Names go byte for byte.
func TestRemoveHiddenReportsWhatItRemoved(t *testing.T) {
	ctx := context.Background()
	back := []GivenBack{{Path: "d/f", As: "d/f"}, {Path: "caf\xe9", As: "caf\xe9.burstcache-kept-1"}}
	res, err := start(t, &fakeService{remaining: 3, givenBack: back}).RemoveHidden(ctx)
	if err != nil || res.Removed != 3 || !slices.Equal(res.GivenBack, back) {
		t.Fatalf("RemoveHidden = %+v, %v; want 3 removed, %v given back", res, err, back)
	}
	svc := &fakeService{remaining: 2, givenBack: back[1:], err: fmt.Errorf("unlink a: %w", syscall.EACCES)}
	res, err = start(t, svc).RemoveHidden(ctx)
	if !errors.Is(err, syscall.EACCES) || res.Removed != 2 || !slices.Equal(res.GivenBack, back[1:]) {
		t.Fatalf("failed RemoveHidden = %+v, %v; want 2 removed, %v given back and EACCES", res, err, back[1:])
	}
	if diff := cmp.Diff([]string{"remove hidden"}, svc.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestStatsTunablesAndReadiness(t *testing.T) {
	svc := &fakeService{}
	c := start(t, svc)
	ctx := context.Background()
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Server.Servers != 3 || st.DirtyBytes != 42 || st.HitRatio() != 0.75 {
		t.Errorf("stats = %+v", st)
	}
	high, threads := 80, 8
	if err := c.SetTunables(ctx, Tunables{DirtyHighWatermarkPercent: &high, WriteBackThreads: &threads}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Tunables{DirtyHighWatermarkPercent: &high, WriteBackThreads: &threads}, svc.tunables); diff != "" {
		t.Errorf("tunables (-want +got):\n%s", diff)
	}
	if err := c.Ready(ctx); err == nil {
		t.Errorf("Ready succeeded on a server that does not serve")
	}
	svc.ready = true
	if err := c.Ready(ctx); err != nil {
		t.Errorf("Ready: %v", err)
	}
}

// names are file names that real file systems hold and that JSON strings
// carry badly or not at all.
var names = map[string]string{
	"ascii":             "a/b",
	"latin-1":           "caf\xe9/r\xe9sum\xe9",
	"arbitrary bytes":   "\xff\xfe\x80/\xc0\xaf",
	"replacement char":  "caf\uFFFD",
	"newline and tab":   "a\nb/c\td",
	"backslash, quotes": `a\b/"c"/'d'`,
	"leading dash":      "-rf",
	"dots and space":    ".../ /. x",
	"255 bytes":         strings.Repeat("\xe9", 255),
	"long path":         strings.Repeat(strings.Repeat("\xe9", 254)+"/", 16) + "f",
}

func TestPathCallsCarryNamesByteForByte(t *testing.T) {
	ctx := context.Background()
	for name, p := range names {
		t.Run(name, func(t *testing.T) {
			svc := &fakeService{}
			c := start(t, svc)
			_, perr := c.Preload(ctx, p)
			for _, err := range []error{c.FlushPath(ctx, p), c.EvictPath(ctx, p), c.InvalidatePath(ctx, p), perr} {
				if err != nil {
					t.Fatal(err)
				}
			}
			want := []string{"preload " + p, "flush " + p, "evict " + p, "invalidate " + p}
			if diff := cmp.Diff(want, svc.calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

// A server of an earlier release decodes the path into a string: it must get
// every UTF-8 path as it did, and refuse the others rather than act on a
// path with U+FFFD in their place.
func TestEarlierServersGetUTF8PathsAndRefuseOthers(t *testing.T) {
	for name, p := range names {
		t.Run(name, func(t *testing.T) {
			body, err := json.Marshal(PathRequest{Path: Path(p)})
			if err != nil {
				t.Fatal(err)
			}
			var old struct {
				Path string `json:"path"`
			}
			err = json.Unmarshal(body, &old)
			if utf8.ValidString(p) {
				if err != nil || old.Path != p {
					t.Errorf("an earlier server decodes %s as %q, %v; want %q", body, old.Path, err, p)
				}
				return
			}
			if err == nil {
				t.Errorf("an earlier server decodes %s as %q; want an error", body, old.Path)
			}
		})
	}
}

func TestPathsFromJSON(t *testing.T) {
	tests := map[string]struct {
		json    string
		want    Path
		wantErr bool
	}{
		"a string":              {json: `"a/b"`, want: "a/b"},
		"escapes":               {json: `"a\nb\t\"\\\u00e9\ufffd"`, want: "a\nb\t\"\\\u00e9\ufffd"},
		"bytes":                 {json: `{"base64":"Y2Fm6Q=="}`, want: "caf\xe9"},
		"null":                  {json: `null`, want: ""},
		"raw bytes not UTF-8":   {json: "\"caf\xe9\"", wantErr: true},
		"an object of no bytes": {json: `{"path":"a"}`, wantErr: true},
		"a number":              {json: `1`, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got PathRequest
			err := json.Unmarshal([]byte(`{"path":`+tc.json+`}`), &got)
			if (err != nil) != tc.wantErr || err == nil && got.Path != tc.want {
				t.Errorf("decoding %s = %q, %v; want %q, error %v", tc.json, got.Path, err, tc.want, tc.wantErr)
			}
		})
	}
}
