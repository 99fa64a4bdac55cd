package control

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"syscall"
)

// tokenLabel is what the control token is an HMAC of. It differs from
// anything the data path signs, so that a token seen on the network proves
// nothing there.
const tokenLabel = "burstcache control API v1"

// Token returns the bearer token that proves to a server's control API that
// the caller holds the instance's shared secret: an HMAC of a fixed label,
// so that the secret itself never crosses the network.
func Token(secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(tokenLabel))
	return hex.EncodeToString(m.Sum(nil))
}

// openPaths are served to every caller: kubelet's probes carry no secret,
// and they tell nothing and change nothing.
var openPaths = map[string]bool{"/healthz": true, "/readyz": true}

// authenticate serves next only to callers that send Token(secret) as a
// bearer token, except for openPaths. Without a secret, as on the data
// path, every caller is served.
func authenticate(secret []byte, next http.Handler) http.Handler {
	if len(secret) == 0 {
		return next
	}
	want := []byte("Bearer " + Token(secret))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(strings.TrimSpace(r.Header.Get("Authorization")))
		if !openPaths[r.URL.Path] && !hmac.Equal(got, want) {
			writeJSON(w, http.StatusUnauthorized, ErrorBody{
				Error: "the control API needs the instance's shared secret", Errno: int(syscall.EACCES)})
			return
		}
		next.ServeHTTP(w, r)
	})
}
