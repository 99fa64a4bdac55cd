package control

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
)

// tokenMessage is what a Token signs. It names the control API, so that a
// token is good for nothing on the data path, whose handshake signs random
// nonces with the same secret.
const tokenMessage = "burstcache control API"

// Token returns the proof that the caller holds an instance's shared
// secret, which calls that may drop data (Discard) must carry to a server
// started with that secret: an HMAC-SHA256 of a fixed message under the
// secret, in hex, so that the secret itself never travels.
func Token(secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(tokenMessage))
	return hex.EncodeToString(m.Sum(nil))
}

// HandlerOption configures NewHandler.
type HandlerOption func(*handler)

// WithSecret makes the handler accept the calls that may drop data only
// with the Token of secret. A handler without a secret refuses them all.
func WithSecret(secret []byte) HandlerOption {
	return func(h *handler) {
		if len(secret) > 0 {
			h.token = Token(secret)
		}
	}
}

// authorized reports whether r carries the handler's token as a bearer
// token. Without a token the handler authorizes nothing.
func (h *handler) authorized(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && h.token != "" && hmac.Equal([]byte(got), []byte(h.token))
}
