package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// servedRig is a handler over a file of calls served, as a server process
// has one; restart makes the handler of the next process over that file.
type servedRig struct {
	t    *testing.T
	file string
	svc  *fakeService
	h    *Handler
	srv  *httptest.Server
}

const servedSecret = "s3cret"

func newServedRig(t *testing.T) *servedRig {
	return newServedRigIn(t, t.TempDir())
}

// newServedRigIn starts a rig whose file of calls served is in dir.
func newServedRigIn(t *testing.T, dir string) *servedRig {
	r := &servedRig{t: t, file: filepath.Join(dir, "served-calls.log"), svc: &fakeService{ready: true}}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *servedRig) start() {
	r.t.Helper()
	h, err := NewHandlerOf(r.svc, HandlerConfig{Secret: []byte(servedSecret), ServedCalls: r.file})
	if err != nil {
		r.t.Fatal(err)
	}
	r.h, r.srv = h, httptest.NewServer(h)
}

func (r *servedRig) stop() {
	r.srv.Close()
	if err := r.h.Close(); err != nil {
		r.t.Error(err)
	}
}

func (r *servedRig) restart() {
	r.t.Helper()
	r.stop()
	r.start()
}

// send sends a call with the Authorization header auth, and returns the
// answer's status.
func (r *servedRig) send(method, uri, auth string) int {
	r.t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, r.srv.URL+uri, strings.NewReader(""))
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestServedCallsAreRefusedAfterARestart sends calls that change something,
// restarts the server, and sends them again: the server's new process must
// refuse them, and serve fresh ones. Before the server kept a file of the
// calls it served, its new process served again a call signed within five
// seconds before it started, or by a caller whose clock ran ahead of the
// server's, a discard included.
func TestServedCallsAreRefusedAfterARestart(t *testing.T) {
	r := newServedRig(t)
	secret := []byte(servedSecret)
	seen := map[string]struct{ method, uri, auth string }{
		"a discard":                  {http.MethodPost, "/v1/discard", sign(secret, http.MethodPost, "/v1/discard", nil, time.Now())},
		"a drain from a clock ahead": {http.MethodPost, "/v1/drain", sign(secret, http.MethodPost, "/v1/drain", nil, time.Now().Add(3*time.Minute))},
	}
	for name, c := range seen {
		if code := r.send(c.method, c.uri, c.auth); code != http.StatusOK {
			t.Fatalf("%s: HTTP %d, want 200", name, code)
		}
	}
	for _, how := range []string{"restart", "second restart"} {
		r.restart()
		r.svc.calls = nil
		for name, c := range seen {
			if code := r.send(c.method, c.uri, c.auth); code != http.StatusUnauthorized {
				t.Errorf("%s sent again after a %s: HTTP %d, want 401", name, how, code)
			}
		}
		if code := r.send(http.MethodPost, "/v1/discard", sign(secret, http.MethodPost, "/v1/discard", nil, time.Now())); code != http.StatusOK {
			t.Errorf("a fresh discard after a %s: HTTP %d, want 200", how, code)
		}
		if diff := cmp.Diff([]string{"discard"}, r.svc.calls); diff != "" {
			t.Errorf("calls served after a %s (-want +got):\n%s", how, diff)
		}
	}
}

// TestServedLogKeepsCallsWorthRemembering checks what the file of calls
// served holds: the calls that change something, not the stats that the
// operator asks for every few seconds (an fsync each).
func TestServedLogKeepsCallsWorthRemembering(t *testing.T) {
	r := newServedRig(t)
	secret := []byte(servedSecret)
	stats := newCallID(time.Now())
	flush := newCallID(time.Now())
	if code := r.send(http.MethodGet, "/v1/stats", stats.header(secret, http.MethodGet, "/v1/stats", nil)); code != http.StatusOK {
		t.Fatalf("stats: HTTP %d", code)
	}
	if code := r.send(http.MethodPost, "/v1/flush", flush.header(secret, http.MethodPost, "/v1/flush", nil)); code != http.StatusOK {
		t.Fatalf("flush: HTTP %d", code)
	}
	r.restart()
	if diff := cmp.Diff(servedMap(flush), r.h.auth.served.served()); diff != "" {
		t.Errorf("the calls of the log after a restart (-want +got):\n%s", diff)
	}
}

// TestServedLogReadsTheEarlierFormat opens a file of calls served as the
// earlier release wrote it, a line appended per call: the calls worth
// remembering must be kept, and neither calls too old for any server to
// serve nor a torn last line of a call never served. The file made anew
// must read as the earlier format too, so that a server taken back to the
// earlier release forgets nothing.
func TestServedLogReadsTheEarlierFormat(t *testing.T) {
	file := filepath.Join(t.TempDir(), "served-calls.log")
	now := time.Now()
	kept := newCallID(now)
	old := newCallID(now.Add(-maxSkew - time.Minute))
	earlier := "1 0123\n" + formatLine(old) + formatLine(kept) + "17000"
	if err := os.WriteFile(file, []byte(earlier), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := openServedLog(file, now)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	if diff := cmp.Diff(servedMap(kept), l.served()); diff != "" {
		t.Errorf("the calls of the log (-want +got):\n%s", diff)
	}
	fresh := newCallID(now)
	if err := l.record(fresh, now); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := readSlots(b); !ok {
		t.Errorf("the log was not made anew in this release's format")
	}
	if diff := cmp.Diff([]callID{kept, fresh}, readLines(b), cmp.AllowUnexported(callID{})); diff != "" {
		t.Errorf("the calls that a server of the earlier release reads in the log (-want +got):\n%s", diff)
	}
}

// formatLine returns the line of the earlier format that records id.
func formatLine(id callID) string { return fmt.Sprintf("%d %s\n", id.ts, id.nonce) }

// servedMap returns the calls as servedLog.served does.
func servedMap(ids ...callID) map[string]time.Time {
	m := map[string]time.Time{}
	for _, id := range ids {
		m[id.nonce] = time.Unix(id.ts, 0)
	}
	return m
}

// TestServedLogMakesRoomOnlyOfOldCalls records more calls than the file
// has slots for: it must grow while it may, then refuse the calls it has
// no room for (errServedFull) rather than forget one that a server might
// still serve, and take them again once the calls it holds are too old to
// be served.
func TestServedLogMakesRoomOnlyOfOldCalls(t *testing.T) {
	file := filepath.Join(t.TempDir(), "served-calls.log")
	now := time.Now()
	l, err := openServedLogSized(file, now, 3, 7)
	if err != nil {
		t.Fatal(err)
	}
	var ids []callID
	for range 7 {
		id := newCallID(now)
		if err := l.record(id, now); err != nil {
			t.Fatalf("recording call %d of 7: %v", len(ids)+1, err)
		}
		ids = append(ids, id)
	}
	if err := l.record(newCallID(now), now); !errors.Is(err, errServedFull) {
		t.Errorf("recording an eighth call in 7 slots: %v, want errServedFull", err)
	}
	later := now.Add(maxSkew + time.Second)
	last := newCallID(later)
	if err := l.record(last, later); err != nil {
		t.Errorf("recording a call once the others are too old to be served: %v", err)
	}
	if err := l.close(); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(file); err != nil || st.Size() != slotOffset(7) {
		t.Errorf("the file: %v, %v; want %d bytes", st, err, slotOffset(7))
	}
	for name, tc := range map[string]struct {
		at   time.Time
		want map[string]time.Time
	}{
		"at once":   {at: now, want: servedMap(append(ids[1:], last)...)},
		"once late": {at: later, want: servedMap(last)},
	} {
		l, err := openServedLog(file, tc.at)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, l.served()); diff != "" {
			t.Errorf("the calls of the log opened %s (-want +got):\n%s", name, diff)
		}
		l.close()
	}
}

// TestServedLogCrashLosesNoCall cuts short, as a crash would, the writing
// of a call's record, and that of the slots the file grows by: the log
// opened after it must hold every call recorded before, and not the call
// whose record was cut short, which was never served: a torn record reads
// as no call.
func TestServedLogCrashLosesNoCall(t *testing.T) {
	for _, before := range []int{2, 3} { // 3 fill the slots: the next grows the file
		for _, cut := range []int{0, 1, 20, 53, 54, 63, 100, 200} {
			t.Run(fmt.Sprintf("%d calls, cut at %d", before, cut), func(t *testing.T) {
				file := filepath.Join(t.TempDir(), "served-calls.log")
				now := time.Now()
				l, err := openServedLogSized(file, now, 3, 7)
				if err != nil {
					t.Fatal(err)
				}
				var ids []callID
				for range before {
					ids = append(ids, newCallID(now))
					if err := l.record(ids[len(ids)-1], now); err != nil {
						t.Fatal(err)
					}
				}
				l.f = &crashingFile{servedFile: l.f, cut: cut}
				cutShort := newCallID(now)
				if err := l.record(cutShort, now); !errors.Is(err, errCrash) {
					t.Fatalf("recording a call in a crash: %v", err)
				}
				l.f.Close() // the crashed process's descriptor
				after, err := openServedLog(file, now)
				if err != nil {
					t.Fatal(err)
				}
				defer after.close()
				// A record whose last byte, a newline, was not written is
				// whole: the slot ended in one.
				if before == 2 && cut >= servedRecordSize-1 {
					ids = append(ids, cutShort)
				}
				if diff := cmp.Diff(servedMap(ids...), after.served()); diff != "" {
					t.Errorf("the calls of the log after the crash (-want +got):\n%s", diff)
				}
				ids = append(ids, newCallID(now))
				if err := after.record(ids[len(ids)-1], now); err != nil {
					t.Errorf("recording a call after the crash: %v", err)
				}
			})
		}
	}
}

// errCrash is the error of a write that a crash cut short.
var errCrash = errors.New("crashed")

// crashingFile writes only the first cut bytes of what it is given, and
// fails, as a process that was killed meanwhile would.
type crashingFile struct {
	servedFile
	cut int
}

func (f *crashingFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.servedFile.WriteAt(p[:min(f.cut, len(p))], off)
	return n, errors.Join(errCrash, err)
}

// TestUnrecordedCallsAreNotServed breaks the file of calls served: a call
// that changes something must not be served, since the server's next
// process could not refuse it, and the caller learns why (EIO); stats,
// which are not recorded, are still served.
func TestUnrecordedCallsAreNotServed(t *testing.T) {
	r := newServedRig(t)
	if err := r.h.Close(); err != nil {
		t.Fatal(err)
	}
	cl := NewClient(r.srv.URL, []byte(servedSecret), nil)
	if err := cl.Discard(context.Background()); !errors.Is(err, syscall.EIO) {
		t.Errorf("a discard that cannot be recorded: %v, want EIO", err)
	}
	if _, err := cl.Stats(context.Background()); err != nil {
		t.Errorf("stats: %v", err)
	}
	if diff := cmp.Diff([]string{"stats"}, r.svc.calls); diff != "" {
		t.Errorf("calls served (-want +got):\n%s", diff)
	}
}

// BenchmarkRecordedCalls measures what recording a call costs: signed
// flushes served by a handler that keeps the calls in memory, then by one
// that records them in a file on the disk of the test's temporary
// directory, and reports the ratio of their times per call.
func BenchmarkRecordedCalls(b *testing.B) {
	secret := []byte(servedSecret)
	quiet := slog.New(slog.DiscardHandler)
	memory, _ := NewHandlerOf(&fakeService{}, HandlerConfig{Secret: secret, Log: quiet})
	file, err := NewHandlerOf(&fakeService{}, HandlerConfig{Secret: secret, ServedCalls: filepath.Join(b.TempDir(), "served-calls.log"), Log: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer file.Close()
	serve := func(h *Handler) time.Duration {
		start := time.Now()
		for range b.N {
			req := httptest.NewRequest(http.MethodPost, "/v1/flush", nil)
			req.Header.Set("Authorization", sign(secret, http.MethodPost, "/v1/flush", nil, time.Now()))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				b.Fatalf("HTTP %d", w.Code)
			}
		}
		return time.Since(start)
	}
	inMemory, recorded := serve(memory), serve(file)
	b.ReportMetric(float64(inMemory.Nanoseconds())/float64(b.N), "memory-ns/call")
	b.ReportMetric(float64(recorded.Nanoseconds())/float64(b.N), "recorded-ns/call")
	b.ReportMetric(float64(recorded)/float64(inMemory), "recorded/memory")
}
