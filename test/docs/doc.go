// Package docs applies every Kubernetes object that the documentation in
// docs/ shows to a real kube-apiserver with burstcache's CRDs and admission
// webhooks, so that an example that stops being accepted fails a test
// instead of failing a reader. Its tests also hold the troubleshooting guide
// to the API: every condition and event reason must be explained there.
package docs
