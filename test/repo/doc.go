// Package repo finds the checkout of burstcache that a test or a harness
// runs in, so that they can reach what lives beside the code: the CRDs and
// webhook manifests of config/, the scripts of hack/, the documents of
// docs/ and the envtest binaries of bin/k8s.
package repo
