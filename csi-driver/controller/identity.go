package controller

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/types/known/wrapperspb"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// identityServer names the driver and says it has a controller service.
type identityServer struct {
	csi.UnimplementedIdentityServer
	version string
}

var _ csi.IdentityServer = (*identityServer)(nil)

// NewIdentityServer returns the identity service of the controller plugin,
// reporting version as the vendor version.
func NewIdentityServer(version string) csi.IdentityServer {
	return &identityServer{version: version}
}

// GetPluginInfo returns the driver's name and version.
func (s *identityServer) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: cachev1alpha1.DriverName, VendorVersion: s.version}, nil
}

// GetPluginCapabilities reports the controller service.
func (s *identityServer) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{{
		Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}},
	}}}, nil
}

// Probe answers ready: the service needs nothing but the API server, which
// each call reaches on its own.
func (s *identityServer) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}
