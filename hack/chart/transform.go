package main

import (
	"fmt"
	"regexp"
	"strings"
)

// The namespace config/default installs into, which becomes the release's.
const kustomizeNamespace = "burstcache-system"

// clusterScoped are the kinds of config/ that kustomize does not know to be
// cluster-scoped, and so gives the namespace (which the API server drops).
var clusterScoped = map[string]bool{
	"ValidatingAdmissionPolicy":        true,
	"ValidatingAdmissionPolicyBinding": true,
}

// Sentinels are put into objects before they are encoded and replaced by
// template text after, since a template is not YAML:
//   - a map key lineSentinel+ID (value "") becomes the lines of lineTemplates[ID],
//     indented as the key was;
//   - a value blockSentinel+ID becomes a YAML block of blockTemplates[ID],
//     indented under its key;
//   - inlineSentinel+ID inside a string becomes inlineTemplates[ID].
const (
	lineSentinel   = "__LINE__"
	blockSentinel  = "__BLOCK__"
	inlineSentinel = "__INLINE__"
)

var inlineTemplates = map[string]string{
	"namespace":       "{{ .Release.Namespace }}",
	"image":           `{{ include "burstcache.image" . }}`,
	"pullPolicy":      "{{ .Values.image.pullPolicy }}",
	"pullSecretNames": `{{ include "burstcache.imagePullSecretNames" . }}`,
	"managerReplicas": "{{ .Values.manager.replicas }}",
	"certIssuer":      `{{ if .Values.certManager.enabled }}external{{ else }}self{{ end }}`,
	"serverPodAdmins": `{{ join "," .Values.manager.serverPodAdminGroups }}`,
}

var blockTemplates = map[string]string{
	"managerResources": "toYaml .Values.manager.resources",
	"csiNodeResources": "toYaml .Values.csi.node.resources",
}

var lineTemplates = map[string]string{
	"labels":             `include "burstcache.labels" .`,
	"pullSecrets":        `include "burstcache.imagePullSecrets" .`,
	"managerScheduling":  `include "burstcache.scheduling" .Values.manager`,
	"csiNodeScheduling":  `include "burstcache.scheduling" .Values.csi.node`,
	"webhookAnnotations": `include "burstcache.webhookAnnotations" .`,
}

// templatize turns the parts of obj that values control into sentinels,
// and returns the condition under which obj is rendered ("" for always).
func templatize(obj map[string]any) string {
	meta := obj["metadata"].(map[string]any)
	if clusterScoped[str(obj, "kind")] {
		delete(meta, "namespace")
	}
	replaceNamespace(obj)
	labels, _ := meta["labels"].(map[string]any)
	if labels == nil {
		labels = map[string]any{}
		meta["labels"] = labels
	}
	labels[lineSentinel+"labels"] = ""
	kind, name := str(obj, "kind"), str(obj, "metadata", "name")
	switch kind {
	case "Deployment":
		templatizeManager(obj)
	case "DaemonSet":
		templatizeCSINode(obj)
	case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
		// config/ gives these no annotations; the helper writes the
		// whole map when cert-manager injects the caBundle.
		meta[lineSentinel+"webhookAnnotations"] = ""
	}
	if kind == "CSIDriver" || kind == "DaemonSet" || strings.Contains(name, "csi-node") {
		return ".Values.csi.enabled"
	}
	return ""
}

// replaceNamespace points every reference to the kustomize namespace
// (metadata, subjects, webhook services) at the release namespace.
func replaceNamespace(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "namespace" && s == kustomizeNamespace {
				v[k] = inlineSentinel + "namespace"
				continue
			}
			replaceNamespace(x)
		}
	case []any:
		for _, x := range v {
			replaceNamespace(x)
		}
	}
}

func templatizeManager(obj map[string]any) {
	obj["spec"].(map[string]any)["replicas"] = inlineSentinel + "managerReplicas"
	pod := podSpec(obj)
	setScheduling(pod, "managerScheduling")
	c := pod["containers"].([]any)[0].(map[string]any)
	templatizeContainer(c, "managerResources")
	args := c["args"].([]any)
	for i, a := range args {
		if a == "--webhook-cert-issuer=self" {
			args[i] = "--webhook-cert-issuer=" + inlineSentinel + "certIssuer"
		}
	}
	c["args"] = append(args, "--server-image="+inlineSentinel+"image",
		"--server-pod-admin-groups="+inlineSentinel+"serverPodAdmins")
	passPull(c, "--server-image")
}

func templatizeCSINode(obj map[string]any) {
	pod := podSpec(obj)
	setScheduling(pod, "csiNodeScheduling")
	c := pod["containers"].([]any)[0].(map[string]any)
	templatizeContainer(c, "csiNodeResources")
	for i, a := range c["args"].([]any) {
		if s := a.(string); strings.HasPrefix(s, "--mount-image=") {
			c["args"].([]any)[i] = "--mount-image=" + inlineSentinel + "image"
		}
	}
	passPull(c, "--mount-image")
}

// passPull has the pods that container c creates (cache servers, mount
// pods) pull the image as the chart's own pods do, through the flags
// --<image>-pull-policy and --<image>-pull-secrets.
func passPull(c map[string]any, image string) {
	c["args"] = append(c["args"].([]any),
		image+"-pull-policy="+inlineSentinel+"pullPolicy",
		image+"-pull-secrets="+inlineSentinel+"pullSecretNames")
}

func podSpec(obj map[string]any) map[string]any {
	return obj["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
}

// setScheduling replaces the pod's placement with the values'.
func setScheduling(pod map[string]any, id string) {
	for _, k := range []string{"nodeSelector", "tolerations", "affinity"} {
		delete(pod, k)
	}
	pod[lineSentinel+id] = ""
	pod[lineSentinel+"pullSecrets"] = ""
}

func templatizeContainer(c map[string]any, resources string) {
	c["image"] = inlineSentinel + "image"
	c["imagePullPolicy"] = inlineSentinel + "pullPolicy"
	c["resources"] = blockSentinel + resources
}

var (
	lineRE   = regexp.MustCompile(`(?m)^( *)` + lineSentinel + `(\w+): ""$`)
	blockRE  = regexp.MustCompile(`(?m)^( *)([\w.-]+): ` + blockSentinel + `(\w+)$`)
	inlineRE = regexp.MustCompile(inlineSentinel + `([A-Za-z]+)`)
)

// expandSentinels replaces the sentinels of an encoded object by template
// text; an unknown sentinel is a bug of this program and panics.
func expandSentinels(s string) string {
	s = lineRE.ReplaceAllStringFunc(s, func(m string) string {
		g := lineRE.FindStringSubmatch(m)
		return fmt.Sprintf("%s{{- %s | nindent %d }}", g[1], lookup(lineTemplates, g[2]), len(g[1]))
	})
	s = blockRE.ReplaceAllStringFunc(s, func(m string) string {
		g := blockRE.FindStringSubmatch(m)
		return fmt.Sprintf("%s%s: {{- %s | nindent %d }}", g[1], g[2], lookup(blockTemplates, g[3]), len(g[1])+2)
	})
	return inlineRE.ReplaceAllStringFunc(s, func(m string) string {
		return lookup(inlineTemplates, m[len(inlineSentinel):])
	})
}

func lookup(table map[string]string, id string) string {
	t, ok := table[id]
	if !ok {
		panic("unknown chart sentinel " + id)
	}
	return t
}
