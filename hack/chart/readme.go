package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// A value documented in values.yaml by a `# -- text` comment (continued by
// further `# ` lines) right above its key. A documented key with a block
// below it (resources, nodeSelector) is one value; an undocumented key must
// be a section whose keys are all documented.
type valueDoc struct {
	path, doc string
}

// renderReadme writes the chart README: the hand-written head kept in
// readmeHead, then a table of every value with its default.
func renderReadme(values []byte) ([]byte, error) {
	docs, err := parseValueDocs(values)
	if err != nil {
		return nil, err
	}
	tree := map[string]any{}
	if err := yaml.Unmarshal(values, &tree); err != nil {
		return nil, fmt.Errorf("parsing values.yaml: %w", err)
	}
	var b bytes.Buffer
	b.WriteString(readmeHead)
	b.WriteString("| Value | Default | Description |\n|---|---|---|\n")
	for _, d := range docs {
		def, err := json.Marshal(lookupPath(tree, d.path))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", d.path, escapeCell(string(def)), escapeCell(d.doc))
	}
	return b.Bytes(), nil
}

type openKey struct {
	indent     int
	key        string
	documented bool
}

func parseValueDocs(values []byte) ([]valueDoc, error) {
	var docs []valueDoc
	var stack []openKey
	var pending []string
	sc := bufio.NewScanner(bytes.NewReader(values))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		indent := len(line) - len(strings.TrimLeft(line, " "))
		switch {
		case strings.HasPrefix(trimmed, "# --"):
			pending = []string{strings.TrimSpace(strings.TrimPrefix(trimmed, "# --"))}
			continue
		case strings.HasPrefix(trimmed, "#") && pending != nil:
			pending = append(pending, strings.TrimSpace(strings.TrimPrefix(trimmed, "#")))
			continue
		case trimmed == "" || strings.HasPrefix(trimmed, "#") || strings.HasPrefix(trimmed, "- "):
			continue
		}
		key, rest, ok := strings.Cut(trimmed, ":")
		if !ok {
			continue
		}
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		inOpaque := len(stack) > 0 && stack[len(stack)-1].documented
		if inOpaque {
			stack = append(stack, openKey{indent, key, true})
			continue
		}
		path := joinPath(stack, key)
		documented := pending != nil
		if documented {
			docs = append(docs, valueDoc{path: path, doc: strings.Join(pending, " ")})
		} else if strings.TrimSpace(rest) != "" {
			return nil, fmt.Errorf("values.yaml:%d: %s has no `# --` description", n, path)
		}
		pending = nil
		stack = append(stack, openKey{indent, key, documented})
	}
	return docs, sc.Err()
}

func joinPath(stack []openKey, key string) string {
	parts := make([]string, 0, len(stack)+1)
	for _, k := range stack {
		parts = append(parts, k.key)
	}
	return strings.Join(append(parts, key), ".")
}

func lookupPath(tree map[string]any, path string) any {
	var cur any = tree
	for _, k := range strings.Split(path, ".") {
		m, _ := cur.(map[string]any)
		cur = m[k]
	}
	return cur
}

func escapeCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

const readmeHead = `# burstcache Helm chart

<!-- Generated from values.yaml by hack/chart.sh (make chart). Do not edit. -->

burstcache gives batch jobs an ephemeral, SSD-backed, transparent write-back cache in front of a
parallel file system. This chart installs the CRDs, the manager (controllers and admission webhooks),
the CSI driver ` + "`csi.burstcache.io`" + ` with its node plugin, and their RBAC. It is generated from
` + "`config/`" + ` (kustomize) by ` + "`make chart`" + `.

## Install

    make image                                   # bin/images/burstcache.tar, tagged burstcache:dev
    ctr -n k8s.io images import bin/images/burstcache.tar   # or: kind load image-archive, docker load
    kubectl create namespace burstcache-system
    kubectl label namespace burstcache-system pod-security.kubernetes.io/enforce=privileged \
        pod-security.kubernetes.io/audit=restricted
    helm install burstcache charts/burstcache -n burstcache-system

The defaults use the locally loaded image (` + "`burstcache:dev`, pull policy `IfNotPresent`" + `), so no registry
is needed. Object names are fixed (` + "`burstcache-...`" + `): install the chart once per cluster.

## Webhook certificates

By default the manager issues its own webhook certificate: a self-signed CA and a serving certificate
for the webhook Service, kept in the Secret ` + "`burstcache-webhook-server-cert`" + ` (so restarts and replicas reuse
them), renewed 30 days before expiry, with the ` + "`caBundle`" + ` of both webhook configurations set by the
manager. With ` + "`certManager.enabled=true`" + `, cert-manager issues the certificate into the same Secret and
injects the ` + "`caBundle`" + `; the manager only reads it.

## Security

Every pod runs as a non-root user with a read-only root file system, no privilege escalation, all
capabilities dropped and the RuntimeDefault seccomp profile, and meets the Pod Security ` + "`restricted`" + `
level, except two, which need the namespace to enforce ` + "`privileged`" + `:

- the CSI node plugin (DaemonSet ` + "`burstcache-csi-node`" + `): ` + "`privileged: true`" + ` and uid 0, because
  mounting FUSE and bind mounts needs CAP_SYS_ADMIN in the host's mount namespace and /dev/fuse, and
  Bidirectional mount propagation (so kubelet and pods see its mounts) is allowed only to privileged
  containers; hostPath volumes of its own plugin directory, kubelet's ` + "`plugins_registry`" + ` and
  ` + "`/var/lib/kubelet/pods`" + ` only; no host network, PID or IPC; read-only root file system;
- the FUSE mount pods the node plugin starts in the release namespace, one per cached instance and
  node, for the same reasons (they hold the FUSE mounts, which must survive a restart of the plugin).

Cache server pods run in the users' namespaces as the instance's ` + "`runAs`" + ` identity.

## Values

`
