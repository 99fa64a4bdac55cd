// Package registration registers the CSI node plugin with kubelet, the way
// node-driver-registrar does, without that sidecar: it serves kubelet's
// plugin registration API (k8s.io/kubelet/pkg/apis/pluginregistration/v1)
// on a socket in kubelet's plugins_registry directory. Kubelet watches that
// directory, calls GetInfo on every socket that appears, learns the
// driver's name and the endpoint of its CSI socket, and reports the outcome
// with NotifyRegistrationStatus. Removing the socket unregisters the plugin.
package registration
