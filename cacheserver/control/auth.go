package control

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// authScheme names the Authorization header of a signed call:
//
//	Authorization: BC-HMAC-SHA256 ts=<unix seconds>, nonce=<32 hex digits>, mac=<64 hex digits>
//
// where mac is HMAC-SHA256(secret, the lines of signedText). A server
// serves a call whose mac is right, whose time is within maxSkew of its
// clock, and whose nonce it has not seen in that window. The secret never
// crosses the network, and a call seen on it can be neither sent again nor
// changed into another (a drain into a discard, say).
const authScheme = "BC-HMAC-SHA256"

// authLabel starts the text a call signs. It differs from anything the
// data path signs, so that nothing seen on one proves anything on the
// other.
const authLabel = "burstcache control API v2"

// maxSkew is how far a call's time may be from the server's clock. Nodes
// of a cluster keep their clocks within seconds of each other; a call
// refused for its time says by how much the clocks differ.
const maxSkew = 5 * time.Minute

// startSlack is how long before a server started a call to it may have
// been signed. A server without a log of the calls it served (see
// servedLog) remembers them only while it runs, so a call signed earlier
// than this, which a server before a restart may have served, is refused:
// seen on the network before the restart, it would otherwise be served
// again after it. Those signed within it, and those dated ahead by a
// caller whose clock runs fast, only the log keeps from being served
// again. A caller whose clock is behind the server's by more than this has
// its calls refused for that long after a restart, and its retries go
// through.
const startSlack = 5 * time.Second

// maxBody bounds the body of a call the server reads to check its mac.
const maxBody = 1 << 20

// signedText is what the mac of a call covers: the call, its time and
// nonce, and a digest of its body.
func signedText(method, uri string, ts int64, nonce string, body []byte) []byte {
	sum := sha256.Sum256(body)
	return fmt.Appendf(nil, "%s\n%s\n%s\n%d\n%s\n%x", authLabel, method, uri, ts, nonce, sum)
}

func mac(secret, text []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(text)
	return hex.EncodeToString(m.Sum(nil))
}

// callID is what makes a signed call one of a kind: its time and nonce.
// The signature of its answer covers it, so that an answer to one call is
// no answer to another.
type callID struct {
	ts    int64
	nonce string
}

// newCallID returns the time and a fresh nonce of a call made at now.
func newCallID(now time.Time) callID {
	var n [16]byte
	_, _ = rand.Read(n[:])
	return callID{ts: now.Unix(), nonce: hex.EncodeToString(n[:])}
}

// header returns the Authorization header of the call.
func (id callID) header(secret []byte, method, uri string, body []byte) string {
	return fmt.Sprintf("%s ts=%d, nonce=%s, mac=%s", authScheme, id.ts, id.nonce, mac(secret, signedText(method, uri, id.ts, id.nonce, body)))
}

// sign returns the Authorization header of a call at now.
func sign(secret []byte, method, uri string, body []byte, now time.Time) string {
	return newCallID(now).header(secret, method, uri, body)
}

// legacyLabel is what the bearer token of servers of the first release is
// an HMAC of. Those servers take nothing else; servers of this release
// never take it.
const legacyLabel = "burstcache control API v1"

// legacyAuth returns the Authorization header that servers of the first
// release take: the same for every call, so anyone who sees it go by can
// make calls to them. A client sends it only when it was made for a server
// of ProtocolBearer, which the caller knows from a source it trusts (see
// Protocol), never on the word of an answer.
func legacyAuth(secret []byte) string {
	return "Bearer " + mac(secret, []byte(legacyLabel))
}

// openPaths are served to every caller: kubelet's probes carry no secret,
// and they tell nothing and change nothing.
var openPaths = map[string]bool{"/healthz": true, "/readyz": true}

// authenticator serves the calls signed with its secret.
type authenticator struct {
	secret  []byte
	started time.Time
	log     *slog.Logger
	refused atomic.Uint64
	// served records the calls that change something, for the server's
	// next process; nil keeps them in memory only.
	served *servedLog

	mu     sync.Mutex
	seen   map[string]time.Time // nonces of calls served, until they are too old to be served again
	pruned time.Time
}

// errNotRecorded: a call that changes something could not be recorded as
// served (see servedLog), and was not served.
var errNotRecorded = errors.New("the call could not be recorded as served")

// newAuthenticator returns an authenticator that refuses, besides the calls
// it serves, those that served records as served before it started.
func newAuthenticator(secret []byte, served *servedLog, log *slog.Logger) *authenticator {
	a := &authenticator{secret: secret, started: time.Now(), log: log, served: served, seen: map[string]time.Time{}}
	if served != nil {
		for nonce, at := range served.served() {
			a.seen[nonce] = at.Add(maxSkew)
		}
	}
	return a
}

// wrap serves next only to calls signed with the secret (see authScheme),
// but for openPaths, and signs its answers to them (see answerHeader). A
// refusal is signed too when the call's signature was right (a call too
// old, or served before), so that its caller can trust the reason; a call
// signed with another secret gets an unsigned refusal, which its caller
// could not check anyway.
func (a *authenticator) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if openPaths[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		id, err := a.verify(r)
		if err == nil {
			err = a.fresh(id)
		}
		if err == nil {
			err = a.record(id, r.Method)
		}
		aw := newAnswerWriter()
		switch {
		case err == nil:
			next.ServeHTTP(aw, r)
		case id == callID{}:
			a.refuse(w, r, err)
			return
		case errors.Is(err, errNotRecorded):
			a.log.Error("Not serving a control call that could not be recorded", "call", r.Method+" "+r.URL.Path, "err", err)
			writeJSON(aw, http.StatusServiceUnavailable, ErrorBody{Error: err.Error(), Errno: int(syscall.EIO)})
		default:
			a.refuse(aw, r, err)
		}
		aw.sendSigned(w, a.secret, r, id)
	})
}

// refuse answers a call that was not signed as it must be.
func (a *authenticator) refuse(w http.ResponseWriter, r *http.Request, err error) {
	a.refused.Add(1)
	a.log.Warn("Refusing control call", "remote", r.RemoteAddr, "call", r.Method+" "+r.URL.Path, "err", err)
	w.Header().Set("WWW-Authenticate", authScheme)
	writeJSON(w, http.StatusUnauthorized, ErrorBody{
		Error: "the control API needs a call signed with the instance's shared secret: " + err.Error(),
		Errno: int(syscall.EACCES)})
}

// verify checks the signature of r, gives r its body back to read, and
// returns the call's time and nonce; a zero callID with an error when the
// signature is missing or wrong.
func (a *authenticator) verify(r *http.Request) (callID, error) {
	ts, nonce, got, err := parseAuth(r.Header.Get("Authorization"))
	if err != nil {
		return callID{}, err
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return callID{}, fmt.Errorf("reading the body: %w", err)
	}
	if len(body) > maxBody {
		return callID{}, fmt.Errorf("a body of more than %d bytes", maxBody)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	want := mac(a.secret, signedText(r.Method, r.URL.RequestURI(), ts, nonce, body))
	if !hmac.Equal([]byte(got), []byte(want)) {
		return callID{}, fmt.Errorf("the signature does not match")
	}
	return callID{ts: ts, nonce: nonce}, nil
}

// fresh checks that a call whose signature is right may be served now: it
// is recent, signed after the server started, and not served before.
func (a *authenticator) fresh(id callID) error {
	ts, nonce := id.ts, id.nonce
	now := time.Now()
	at := time.Unix(ts, 0)
	if skew := now.Sub(at); skew > maxSkew || skew < -maxSkew {
		return fmt.Errorf("the call's time differs from the server's clock by %v, more than %v", skew.Round(time.Second), maxSkew)
	}
	if at.Before(a.started.Add(-startSlack)) {
		return fmt.Errorf("the call was signed %v before the server started", a.started.Sub(at).Round(time.Second))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if now.Sub(a.pruned) > time.Minute {
		for n, until := range a.seen {
			if now.After(until) {
				delete(a.seen, n)
			}
		}
		a.pruned = now
	}
	if _, ok := a.seen[nonce]; ok {
		return fmt.Errorf("the call was served before")
	}
	a.seen[nonce] = at.Add(maxSkew)
	return nil
}

// record adds a call that changes something to the log of calls served,
// durably, before it is served (see servedLog). A call that changes
// nothing, and any call of a server without a log, is not recorded.
func (a *authenticator) record(id callID, method string) error {
	if a.served == nil || method == http.MethodGet || method == http.MethodHead {
		return nil
	}
	if err := a.served.record(id, time.Now()); err != nil {
		return fmt.Errorf("%w: %w", errNotRecorded, err)
	}
	return nil
}

// parseAuth reads an Authorization header of authScheme.
func parseAuth(h string) (ts int64, nonce, mac string, err error) {
	params, ok := strings.CutPrefix(strings.TrimSpace(h), authScheme+" ")
	if !ok {
		return 0, "", "", fmt.Errorf("no %s Authorization header", authScheme)
	}
	for _, kv := range strings.Split(params, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		switch k {
		case "ts":
			ts, err = strconv.ParseInt(v, 10, 64)
		case "nonce":
			nonce = v
		case "mac":
			mac = v
		}
		if err != nil {
			return 0, "", "", fmt.Errorf("a malformed Authorization header")
		}
	}
	if ts == 0 || len(nonce) != 32 || len(mac) != 64 {
		return 0, "", "", fmt.Errorf("a malformed Authorization header")
	}
	return ts, nonce, mac, nil
}
