package main

import (
	"slices"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
)

// pullFlags say how the pods that burstcache creates pull their image, so
// that an installation's pull policy and registry credentials reach them
// as they reach the manager and the node plugin.
type pullFlags struct {
	// flag is the prefix of the flags' names, such as "server-image".
	flag    string
	policy  string
	secrets []string
}

// register adds --<prefix>-pull-policy and --<prefix>-pull-secrets. The
// policy defaults to IfNotPresent rather than to Kubernetes' default, which
// pulls a latest tag for every pod and fails on an image loaded onto the
// nodes without a registry.
func (f *pullFlags) register(fl *pflag.FlagSet, prefix, image, where string) {
	f.flag = prefix
	fl.StringVar(&f.policy, prefix+"-pull-policy", string(corev1.PullIfNotPresent),
		"pull policy of "+image+": Always, IfNotPresent or Never")
	fl.StringSliceVar(&f.secrets, prefix+"-pull-secrets", nil,
		"names of the Secrets, "+where+", that pull "+image+" from a private registry")
}

var pullPolicies = []corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}

// validate refuses a policy that the API server would refuse for every
// pod, at start rather than at the first pod.
func (f *pullFlags) validate() error {
	if !slices.Contains(pullPolicies, corev1.PullPolicy(f.policy)) {
		return badInput("--%s-pull-policy %q: want Always, IfNotPresent or Never", f.flag, f.policy)
	}
	return nil
}

func (f *pullFlags) pullPolicy() corev1.PullPolicy { return corev1.PullPolicy(f.policy) }

// pullSecrets returns the Secrets as a pod names them; empty names, as an
// empty flag value gives, are dropped.
func (f *pullFlags) pullSecrets() []corev1.LocalObjectReference {
	var refs []corev1.LocalObjectReference
	for _, name := range f.secrets {
		if name != "" {
			refs = append(refs, corev1.LocalObjectReference{Name: name})
		}
	}
	return refs
}
