// Package apiserver starts a real kube-apiserver and etcd (envtest) for the
// suites and harnesses that test burstcache against Kubernetes, installed
// as the chart installs them: the CustomResourceDefinitions of
// config/crd/bases and, when asked, the admission webhooks of
// config/webhook.
//
// The binaries come from KUBEBUILDER_ASSETS when it holds them (the
// Makefile sets it), else from bin/k8s of the checkout (`make envtest`
// builds them there). Without them Start fails, with directions, rather
// than letting a suite skip: a missing apiserver must never pass for green.
package apiserver
