package registration

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// TestKubeletDialsRegistrationSocket dials the socket as kubelet's plugin
// watcher does and checks what it learns.
func TestKubeletDialsRegistrationSocket(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	srv := &Server{Driver: "csi.burstcache.io", Endpoint: "/var/lib/kubelet/plugins/csi.burstcache.io/csi.sock", Log: testr.New(t)}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, dir) }()

	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, "csi.burstcache.io-reg.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := registerapi.NewRegistrationClient(conn)
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	defer ccancel()
	info, err := c.GetInfo(cctx, &registerapi.InfoRequest{}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("GetInfo: %v", err)
	}
	if info.Type != registerapi.CSIPlugin || info.Name != srv.Driver || info.Endpoint != srv.Endpoint || len(info.SupportedVersions) == 0 {
		t.Fatalf("GetInfo = %+v, want a CSI plugin %s at %s", info, srv.Driver, srv.Endpoint)
	}
	if _, err := c.NotifyRegistrationStatus(cctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatalf("NotifyRegistrationStatus: %v", err)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.sock")); len(m) != 0 {
		t.Fatalf("socket %v left after Serve returned; kubelet would keep the plugin registered", m)
	}
}
