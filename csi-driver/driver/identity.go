package driver

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/types/known/wrapperspb"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// identityServer names the driver and says which services it serves.
type identityServer struct {
	csi.UnimplementedIdentityServer
	version    string
	controller bool
}

var _ csi.IdentityServer = (*identityServer)(nil)

// GetPluginInfo returns the driver's name and version.
func (s *identityServer) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: cachev1alpha1.DriverName, VendorVersion: s.version}, nil
}

// Probe says the plugin is ready: it serves only once it has started.
func (s *identityServer) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

// GetPluginCapabilities lists the controller service when this instance
// or another of the deployment serves one.
func (s *identityServer) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	resp := &csi.GetPluginCapabilitiesResponse{}
	if s.controller {
		resp.Capabilities = append(resp.Capabilities, &csi.PluginCapability{
			Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{
				Type: csi.PluginCapability_Service_CONTROLLER_SERVICE,
			}},
		})
	}
	return resp, nil
}
