package local

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/burstcache/burstcache/cacheserver/control"
)

// secretPath is where the instance in cacheDir keeps its shared secret.
func secretPath(cacheDir string) string { return filepath.Join(cacheDir, "secret") }

// secret returns the instance's shared secret, which its servers ask of
// every control call as they do of every mount.
func (st *State) secret() ([]byte, error) {
	b, err := os.ReadFile(secretPath(st.CacheDir))
	if err != nil {
		return nil, fmt.Errorf("reading the instance's secret: %w", err)
	}
	return bytes.TrimSpace(b), nil
}

// controlClient returns a client of the control API of server s, in the
// protocol that the state says it speaks; a nil hc means
// http.DefaultClient.
func (st *State) controlClient(s ServerState, hc *http.Client) (*control.Client, error) {
	secret, err := st.secret()
	if err != nil {
		return nil, err
	}
	proto := s.ControlProtocol
	if proto == 0 {
		proto = control.ProtocolSignedCalls
	}
	return control.NewClientFor(control.Server{Addr: s.Control, Index: s.Index, Protocol: proto}, secret, hc), nil
}
