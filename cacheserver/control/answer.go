package control

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// answerHeader carries the signature of a server's answer to a signed
// call:
//
//	Authentication-Info: mac=<64 hex digits>
//
// where mac is HMAC-SHA256(secret, the lines of answerText): the call it
// answers (method, URI, time and nonce, and the server it was meant for,
// if it names one), the answer's status and a digest of its body. A client of ProtocolSigned takes no answer without it, so
// that whoever answers at a server's address (a pod that got the address
// of a dead server, anyone on the path) cannot make a drain look done or a
// server look clean, nor hand the answer to one call to another.
const answerHeader = "Authentication-Info"

// answerLabel starts the text an answer to a call that names no server
// signs. It differs from authLabel, so that the signature of a call is
// never that of an answer.
const answerLabel = "burstcache control API v2 answer"

// addressedAnswerLabel starts the text an answer to a call that names its
// server signs. It differs from the other labels, so that no answer to a
// call that names no server is one to a call that names one: a caller of
// ProtocolAddressed takes only answers of the server it called.
const addressedAnswerLabel = "burstcache control API v4 answer"

// maxAnswer bounds the body of an answer the client reads. The largest
// answers, statistics, are a few KiB.
const maxAnswer = 1 << 20

// answerText is what the mac of an answer covers.
func answerText(method, uri string, id callID, status int, body []byte) []byte {
	sum := sha256.Sum256(body)
	if id.server == "" {
		return fmt.Appendf(nil, "%s\n%s\n%s\n%d\n%s\n%d\n%x", answerLabel, method, uri, id.ts, id.nonce, status, sum)
	}
	return fmt.Appendf(nil, "%s\n%s\n%s\n%d\n%s\nserver %s\n%d\n%x", addressedAnswerLabel, method, uri, id.ts, id.nonce, id.server, status, sum)
}

// ErrUnsignedAnswer is matched by the error of a call whose answer does
// not carry a right signature of the instance's shared secret for that
// call: the answer came from something other than the server (a process
// that took its address, or anyone on the path), was changed on the way,
// or came from a server of a release that signs no answers. Nothing of
// such an answer is taken, a success least of all.
var ErrUnsignedAnswer = errors.New("the answer is not signed with the instance's shared secret for this call")

// checkAnswer returns nil if data, answered with resp to the call id of
// method on uri, carries a right signature, and else an error matching
// ErrUnsignedAnswer that says what the answer claimed.
func checkAnswer(secret []byte, method, uri string, id callID, resp *http.Response, data []byte) error {
	got, ok := strings.CutPrefix(resp.Header.Get(answerHeader), "mac=")
	want := mac(secret, answerText(method, uri, id, resp.StatusCode, data))
	if ok && hmac.Equal([]byte(got), []byte(want)) {
		return nil
	}
	why := "it has no signature"
	if resp.Header.Get(answerHeader) != "" {
		why = "its signature does not match"
	}
	said := strings.TrimSpace(string(data))
	if len(said) > 200 {
		said = said[:200] + "..."
	}
	return fmt.Errorf("%w (HTTP %d, %s; it said %q): not taken, since it may come from another process at the server's address or have been changed on the way",
		ErrUnsignedAnswer, resp.StatusCode, why, said)
}

// answerWriter holds an answer until it is complete, so that its
// signature, which goes in a header, can cover its body.
type answerWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newAnswerWriter() *answerWriter { return &answerWriter{header: http.Header{}} }

func (w *answerWriter) Header() http.Header { return w.header }

func (w *answerWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *answerWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

// sendSigned writes the answer held to w, signed for the call id of r.
func (w *answerWriter) sendSigned(to http.ResponseWriter, secret []byte, r *http.Request, id callID) {
	w.WriteHeader(http.StatusOK)
	h := to.Header()
	for k, v := range w.header {
		h[k] = v
	}
	h.Set(answerHeader, "mac="+mac(secret, answerText(r.Method, r.URL.RequestURI(), id, w.status, w.body.Bytes())))
	to.WriteHeader(w.status)
	_, _ = to.Write(w.body.Bytes())
}
