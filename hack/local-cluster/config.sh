# Configuration files and flags of the local cluster's components, as
# LOCAL-CLUSTER.md lists them. Sourced by hack/local-cluster.sh.

APISERVER_FLAGS=(
	--etcd-servers=http://127.0.0.1:2379
	--bind-address="$NODE_IP" --advertise-address="$NODE_IP" --secure-port=6443
	--client-ca-file="$STATE/pki/ca.crt"
	--tls-cert-file="$STATE/pki/apiserver.crt" --tls-private-key-file="$STATE/pki/apiserver.key"
	--kubelet-client-certificate="$STATE/pki/apiserver-kubelet-client.crt"
	--kubelet-client-key="$STATE/pki/apiserver-kubelet-client.key"
	--kubelet-certificate-authority="$STATE/pki/ca.crt"
	--kubelet-preferred-address-types=InternalIP
	--service-account-issuer=https://kubernetes.default.svc.cluster.local
	--service-account-key-file="$STATE/pki/sa.pub" --service-account-signing-key-file="$STATE/pki/sa.key"
	--service-cluster-ip-range="$SERVICE_CIDR"
	--authorization-mode=Node,RBAC --allow-privileged=true --enable-admission-plugins=NodeRestriction
	--admission-control-config-file="$STATE/admission.yaml"
	# Reach webhook and aggregated API Services at their endpoints (pod IPs,
	# routed through cni0), not their ClusterIPs: the service range is
	# blackholed on the host, and kube-proxy's DNAT comes after the route
	# lookup of a locally made connection.
	--enable-aggregator-routing=true
)

CONTROLLER_MANAGER_FLAGS=(
	--kubeconfig="$STATE/kube-controller-manager.kubeconfig"
	--authentication-kubeconfig="$STATE/kube-controller-manager.kubeconfig"
	--authorization-kubeconfig="$STATE/kube-controller-manager.kubeconfig"
	--use-service-account-credentials
	--cluster-signing-cert-file="$STATE/pki/ca.crt" --cluster-signing-key-file="$STATE/pki/ca.key"
	--root-ca-file="$STATE/pki/ca.crt" --service-account-private-key-file="$STATE/pki/sa.key"
	--cluster-cidr="$POD_CIDR" --allocate-node-cidrs=true --service-cluster-ip-range="$SERVICE_CIDR"
	--bind-address=127.0.0.1 --leader-elect=false
)

write_configs() {
	containerd_config >"$STATE/containerd.toml"
	mkdir -p "$STATE/cni"
	cni_config >"$STATE/cni/10-burstcache.conflist"
	kubelet_config >"$STATE/kubelet.yaml"
	kube_proxy_config >"$STATE/kube-proxy.yaml"
	admission_config >"$STATE/admission.yaml"
}

# admission_config exempts from Pod Security the burstcache manager of the
# chart's default install, as the admin guide tells admins to: it creates
# the cache server pods, which mount host paths, in the namespaces of the
# instances, which may then enforce Pod Security baseline or restricted.
admission_config() {
	cat <<YAML
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults:
      enforce: privileged
      enforce-version: latest
    exemptions:
      usernames:
      - system:serviceaccount:burstcache-system:burstcache-manager
YAML
}

# containerd 2.x (config version 3). restrict_oom_score_adj: root here lacks
# CAP_SYS_RESOURCE, and without it every sandbox fails to start.
containerd_config() {
	cat <<TOML
version = 3
root = "$STATE/containerd"
state = "$RUN/state"

[grpc]
  address = "$SOCK"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "$PAUSE_IMAGE"

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$STATE/cni"
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      SystemdCgroup = false
TOML
}

cni_config() {
	cat <<JSON
{
  "cniVersion": "1.0.0",
  "name": "burstcache",
  "plugins": [
    {
      "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON
}

# Imported images must never be collected (nothing can pull them again), and
# this machine's disk is shared, hence the low eviction thresholds.
kubelet_config() {
	cat <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$SOCK
address: $NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $STATE/pki/ca.crt
authorization:
  mode: Webhook
tlsCertFile: $STATE/pki/kubelet-serving.crt
tlsPrivateKeyFile: $STATE/pki/kubelet-serving.key
clusterDomain: cluster.local
clusterDNS:
- 10.96.0.10
failSwapOn: false
rotateCertificates: false
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  nodefs.available: "1%"
  nodefs.inodesFree: "1%"
  imagefs.available: "1%"
  memory.available: "100Mi"
YAML
}

kube_proxy_config() {
	cat <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: $POD_CIDR
bindAddress: $NODE_IP
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
hostnameOverride: $NODE
clientConnection:
  kubeconfig: $STATE/kube-proxy.kubeconfig
conntrack:
  maxPerCore: 0
YAML
}
