package registration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// DefaultDir is kubelet's plugin registration directory.
const DefaultDir = "/var/lib/kubelet/plugins_registry"

// SocketPath returns the registration socket of driver in dir.
func SocketPath(dir, driver string) string {
	return filepath.Join(dir, driver+"-reg.sock")
}

// Server answers kubelet's registration calls for one CSI driver.
type Server struct {
	registerapi.UnimplementedRegistrationServer
	// Driver is the CSI driver's name.
	Driver string
	// Endpoint is the path of the driver's CSI socket, as kubelet sees it
	// on the host.
	Endpoint string
	// Log receives the outcome kubelet reports.
	Log logr.Logger
}

// supportedVersions are the versions of the CSI spec the plugin serves, as
// kubelet expects them.
var supportedVersions = []string{"1.0.0"}

// GetInfo tells kubelet the driver's name and where its CSI socket is.
func (s *Server) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type: registerapi.CSIPlugin, Name: s.Driver, Endpoint: s.Endpoint, SupportedVersions: supportedVersions,
	}, nil
}

// NotifyRegistrationStatus logs what kubelet made of the registration.
func (s *Server) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if st.PluginRegistered {
		s.Log.Info("Registered with kubelet", "driver", s.Driver, "endpoint", s.Endpoint)
	} else {
		s.Log.Error(errors.New(st.Error), "Kubelet refused the registration", "driver", s.Driver)
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// Serve serves the registration API on the driver's socket in dir until ctx
// ends, then removes the socket, which unregisters the plugin.
func (s *Server) Serve(ctx context.Context, dir string) error {
	path := SocketPath(dir, s.Driver)
	// A socket left by an earlier plugin would make listening fail.
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing stale registration socket: %w", err)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("listening on registration socket: %w", err)
	}
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, s)
	go func() {
		<-ctx.Done()
		srv.Stop()
	}()
	s.Log.Info("Serving kubelet registration", "socket", path)
	err = srv.Serve(lis)
	_ = os.Remove(path)
	if ctx.Err() != nil {
		return nil
	}
	return err
}
