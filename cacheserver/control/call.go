package control

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// authScheme names the Authorization header of a signed call:
//
//	Authorization: BC-HMAC-SHA256 ts=<unix seconds>, nonce=<32 hex digits>, server=<index>, mac=<64 hex digits>
//
// where mac is HMAC-SHA256(secret, the lines of signedText). A server
// serves a call whose mac is right, whose time is within maxSkew of its
// clock, and whose nonce it has not seen in that window. The secret never
// crosses the network, and a call seen on it can be neither sent again nor
// changed into another (a drain into a discard, say).
//
// Every server of an instance holds the same secret and keeps its own
// nonces, so the mac covers the server the call is meant for too: its
// index in the instance, which the caller knows from a source it trusts
// (the pod the manager made for that index, the state of `burstcache
// local`) and the server from its own configuration, never from the call.
// A call seen on its way to one server is thus no call to another. Calls
// of the protocols before ProtocolAddressed name no server (no server=,
// and a mac of the earlier signedText); a server serves them unless it
// was told to refuse them (HandlerConfig.RefuseUnaddressed).
const authScheme = "BC-HMAC-SHA256"

// authLabel starts the text a call that names no server signs. It differs
// from anything the data path signs, so that nothing seen on one proves
// anything on the other.
const authLabel = "burstcache control API v2"

// addressedLabel starts the text a call that names its server signs. It
// differs from authLabel, so that no mac of a call that names a server is
// that of one that does not.
const addressedLabel = "burstcache control API v4"

// signedText is what the mac of a call covers: the call, its time and
// nonce, the server it is meant for, if it names one, and a digest of its
// body.
func signedText(method, uri string, id callID, body []byte) []byte {
	sum := sha256.Sum256(body)
	if id.server == "" {
		return fmt.Appendf(nil, "%s\n%s\n%s\n%d\n%s\n%x", authLabel, method, uri, id.ts, id.nonce, sum)
	}
	return fmt.Appendf(nil, "%s\n%s\n%s\n%d\n%s\nserver %s\n%x", addressedLabel, method, uri, id.ts, id.nonce, id.server, sum)
}

func mac(secret, text []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(text)
	return hex.EncodeToString(m.Sum(nil))
}

// callID is what makes a signed call one of a kind: its time and nonce,
// and the server it is meant for. The signature of its answer covers it,
// so that an answer to one call is no answer to another, nor one of
// another server.
type callID struct {
	ts    int64
	nonce string
	// server is the index of the server the call is meant for, in
	// decimal; empty for a call that names none.
	server string
}

// newCallID returns the time and a fresh nonce of a call made at now,
// which names no server.
func newCallID(now time.Time) callID {
	var n [16]byte
	_, _ = rand.Read(n[:])
	return callID{ts: now.Unix(), nonce: hex.EncodeToString(n[:])}
}

// to returns the call id meant for server index.
func (id callID) to(index int) callID {
	id.server = strconv.Itoa(index)
	return id
}

// header returns the Authorization header of the call.
func (id callID) header(secret []byte, method, uri string, body []byte) string {
	server := ""
	if id.server != "" {
		server = " server=" + id.server + ","
	}
	return fmt.Sprintf("%s ts=%d, nonce=%s,%s mac=%s", authScheme, id.ts, id.nonce, server, mac(secret, signedText(method, uri, id, body)))
}

// sign returns the Authorization header of a call at now that names no
// server.
func sign(secret []byte, method, uri string, body []byte, now time.Time) string {
	return newCallID(now).header(secret, method, uri, body)
}

// parseAuth reads an Authorization header of authScheme: the call it
// claims to be, and its mac.
func parseAuth(h string) (id callID, mac string, err error) {
	params, ok := strings.CutPrefix(strings.TrimSpace(h), authScheme+" ")
	if !ok {
		return callID{}, "", fmt.Errorf("no %s Authorization header", authScheme)
	}
	for _, kv := range strings.Split(params, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		switch k {
		case "ts":
			id.ts, err = strconv.ParseInt(v, 10, 64)
		case "nonce":
			id.nonce = v
		case "server":
			id.server = v
			if n, perr := strconv.Atoi(v); perr != nil || n < 0 || strconv.Itoa(n) != v {
				err = fmt.Errorf("a server index %q", v)
			}
		case "mac":
			mac = v
		}
		if err != nil {
			return callID{}, "", fmt.Errorf("a malformed Authorization header")
		}
	}
	if id.ts == 0 || len(id.nonce) != 32 || len(mac) != 64 {
		return callID{}, "", fmt.Errorf("a malformed Authorization header")
	}
	return id, mac, nil
}
