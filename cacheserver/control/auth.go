package control

import (
	"bytes"
	"crypto/hmac"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

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

// authenticator serves the calls signed with its secret for its server.
type authenticator struct {
	secret []byte
	// server is the index of its server in the instance, in decimal: the
	// server that the calls it serves must be meant for, if they name one.
	server string
	// refuseUnaddressed refuses the calls that name no server.
	refuseUnaddressed bool
	started           time.Time
	log               *slog.Logger
	refused           atomic.Uint64
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

// errOtherServer: the call is signed for another server of the instance.
var errOtherServer = errors.New("the call is meant for another server")

// errUnaddressed: the call names no server, and the server refuses such
// calls (HandlerConfig.RefuseUnaddressed).
var errUnaddressed = errors.New("the call names no server")

// newAuthenticator returns an authenticator of the calls that cfg says,
// that refuses, besides the calls it serves, those that served records as
// served before it started.
func newAuthenticator(cfg HandlerConfig, served *servedLog, log *slog.Logger) *authenticator {
	a := &authenticator{secret: cfg.Secret, server: strconv.Itoa(cfg.Index), refuseUnaddressed: cfg.RefuseUnaddressed,
		started: time.Now(), log: log, served: served, seen: map[string]time.Time{}}
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
// old, served before, or naming no server to a server that refuses such
// calls), so that its caller can trust the reason; a call signed with
// another secret, or for another server, gets an unsigned refusal, which
// its caller could not check anyway.
func (a *authenticator) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if openPaths[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		id, err := a.verify(r)
		if err == nil {
			err = a.addressed(id)
		}
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
// returns the call's time, nonce and server; a zero callID with an error
// when the signature is missing or wrong. A call that names a server must
// be signed for this one: the mac is checked against the text that names
// it, whichever server the call says.
func (a *authenticator) verify(r *http.Request) (callID, error) {
	id, got, err := parseAuth(r.Header.Get("Authorization"))
	if err != nil {
		return callID{}, err
	}
	said := id.server
	if said != "" {
		id.server = a.server
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return callID{}, fmt.Errorf("reading the body: %w", err)
	}
	if len(body) > maxBody {
		return callID{}, fmt.Errorf("a body of more than %d bytes", maxBody)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	want := mac(a.secret, signedText(r.Method, r.URL.RequestURI(), id, body))
	switch {
	case hmac.Equal([]byte(got), []byte(want)):
		return id, nil
	case said != "" && said != a.server:
		// What the call says is not checked: it only tells the caller,
		// or whoever sent the call on, why.
		return callID{}, fmt.Errorf("%w: it says server %s, and this is server %s of its instance", errOtherServer, said, a.server)
	}
	return callID{}, fmt.Errorf("the signature does not match")
}

// addressed checks that a call whose signature is right names its server,
// if the server takes only such calls.
func (a *authenticator) addressed(id callID) error {
	if id.server == "" && a.refuseUnaddressed {
		return fmt.Errorf("%w: this server takes only calls signed for it (control protocol %d and later), so that a call seen on its way to another server of its instance is no call to it", errUnaddressed, ProtocolAddressed)
	}
	return nil
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
