# The local cluster's PKI, made with openssl once and kept until down: a CA
# (also the cluster-signing CA), the service-account key pair, serving
# certificates for kube-apiserver and kubelet, client certificates for every
# component, and their kubeconfigs. Sourced by hack/local-cluster.sh.

pki() {
	local d="$STATE/pki"
	mkdir -p "$d"
	if [ ! -f "$d/ca.crt" ]; then
		openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -days 3650 \
			-keyout "$d/ca.key" -out "$d/ca.crt" -subj "/CN=burstcache-local-ca" 2>/dev/null
	fi
	if [ ! -f "$d/sa.key" ]; then
		openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$d/sa.key" 2>/dev/null
		openssl pkey -in "$d/sa.key" -pubout -out "$d/sa.pub"
	fi
	local san="DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
	cert apiserver "/CN=kube-apiserver" serverAuth "$san,IP:127.0.0.1,IP:$NODE_IP,IP:10.96.0.1"
	cert kubelet-serving "/CN=$NODE" serverAuth "DNS:$NODE,IP:$NODE_IP"
	cert admin "/O=system:masters/CN=admin" clientAuth
	cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
	cert kube-controller-manager "/CN=system:kube-controller-manager" clientAuth
	cert kube-scheduler "/CN=system:kube-scheduler" clientAuth
	cert kube-proxy "/CN=system:kube-proxy" clientAuth
	cert kubelet "/O=system:nodes/CN=system:node:$NODE" clientAuth
	local c
	for c in admin kube-controller-manager kube-scheduler kube-proxy kubelet; do
		kubeconfig "$c"
	done
}

# cert NAME SUBJECT USAGE [SANS]: a key and a certificate signed by the CA.
cert() {
	local name="$1" subj="$2" usage="$3" san="${4:-}" d="$STATE/pki"
	[ -f "$d/$name.crt" ] && return
	openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
		-keyout "$d/$name.key" -out "$d/$name.csr" -subj "$subj" 2>/dev/null
	{
		echo "basicConstraints=critical,CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage=$usage"
		[ -z "$san" ] || echo "subjectAltName=$san"
	} >"$d/$name.ext"
	openssl x509 -req -in "$d/$name.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
		-days 365 -extfile "$d/$name.ext" -out "$d/$name.crt" 2>/dev/null
	rm -f "$d/$name.csr" "$d/$name.ext"
}

# kubeconfig NAME: $STATE/NAME.kubeconfig, with the client certificate NAME.
kubeconfig() {
	local name="$1" d="$STATE/pki"
	cat >"$STATE/$name.kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://$NODE_IP:6443
    certificate-authority: $d/ca.crt
users:
- name: $name
  user:
    client-certificate: $d/$name.crt
    client-key: $d/$name.key
contexts:
- name: $name@local
  context:
    cluster: local
    user: $name
current-context: $name@local
KUBECONFIG
}
