package integration

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/control"
)

// TestCallsCapturedOnTheirWayToOneServerAreRefusedByAnother captures a
// signed control call on its way to server 0 of an instance and sends it
// to server 1, which holds the same secret and keeps nonces of its own:
// server 1 must refuse it, and still serve the calls signed for it. Calls
// used to name no server, and server 1 served a discard meant for server
// 0 as its own. A call of a caller of the earlier protocol, which names no
// server, must be refused by a server told to refuse such calls, as the
// manager's server pods are, even when server 0, a server of the release
// before, served it.
func TestCallsCapturedOnTheirWayToOneServerAreRefusedByAnother(t *testing.T) {
	for name, tc := range map[string]struct {
		proto   control.Protocol
		flags   [][]string
		wantWhy string
	}{
		"a call that names its server": {proto: control.ProtocolAddressed, flags: [][]string{nil, nil},
			wantWhy: "meant for another server: it says server 0, and this is server 1"},
		"a call that names none, to a server of the pods": {proto: control.ProtocolSigned, flags: [][]string{nil, {"--refuse-unaddressed-calls"}},
			wantWhy: "the call names no server"},
	} {
		t.Run(name, func(t *testing.T) {
			srv := newHandServers(t, tc.flags)
			for _, s := range srv {
				s.start(t)
			}
			rec := &recorder{}
			hc := &http.Client{Transport: rec, Timeout: 30 * time.Second}
			ctx := context.Background()
			to0 := control.NewClientFor(control.Server{Addr: srv[0].control, Index: 0, Protocol: tc.proto}, srv[0].secret, hc)
			if _, err := to0.Flush(ctx); err != nil {
				t.Fatalf("a flush of server 0: %v", err)
			}
			seen := rec.last()
			status, body := seen.sendTo(t, srv[1].control)
			if status != http.StatusUnauthorized {
				t.Errorf("the flush meant for server 0, sent to server 1: HTTP %d, want 401\n%s", status, body)
			}
			if !strings.Contains(body, tc.wantWhy) {
				t.Errorf("server 1 refused the flush meant for server 0 saying %s; want it to say %q", strings.TrimSpace(body), tc.wantWhy)
			}
			to1 := control.NewClientFor(control.Server{Addr: srv[1].control, Index: 1, Protocol: control.CurrentProtocol}, srv[1].secret, nil)
			if _, err := to1.Flush(ctx); err != nil {
				t.Errorf("a flush signed for server 1: %v", err)
			}
		})
	}
}

// TestLocalServersRefuseCallsThatNameNoServer: the servers that local up
// starts are called only by the local commands of their release, which
// name the server they call, so a call that names none, captured on its
// way to server 0, must be refused by server 1. They used to serve such
// calls, as servers do for callers of earlier releases.
func TestLocalServersRefuseCallsThatNameNoServer(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 2)
	st := readState(t, in.cacheDir)
	secret, err := os.ReadFile(filepath.Join(in.cacheDir, "secret"))
	if err != nil {
		t.Fatal(err)
	}
	secret = bytes.TrimSpace(secret)
	rec := &recorder{}
	hc := &http.Client{Transport: rec, Timeout: 30 * time.Second}
	ctx := context.Background()
	old := control.NewClientFor(control.Server{Addr: st.Servers[0].Control, Index: 0, Protocol: control.ProtocolSigned}, secret, hc)
	if _, err := old.Flush(ctx); err == nil {
		t.Errorf("a flush that names no server was served by server 0")
	}
	status, body := rec.last().sendTo(t, st.Servers[1].Control)
	if status != http.StatusUnauthorized || !strings.Contains(body, "the call names no server") {
		t.Errorf("a flush that names no server, sent to server 1: HTTP %d %s; want 401 saying the call names no server", status, strings.TrimSpace(body))
	}
	must(t, "local", "flush", "--mount", in.mount, in.mount)
}
