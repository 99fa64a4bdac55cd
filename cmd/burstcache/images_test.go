package main

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	"github.com/burstcache/burstcache/csi-driver/mounter"
)

// TestPullFlagsReachThePods: the pull policy and secrets given to the
// manager and the node plugin are those of the server and mount pods they
// create, and a manager or plugin run without them pulls only an image that
// is not on the node.
func TestPullFlagsReachThePods(t *testing.T) {
	tests := map[string]struct {
		args        []string
		wantPolicy  corev1.PullPolicy
		wantSecrets []corev1.LocalObjectReference
	}{
		"defaults": {wantPolicy: corev1.PullIfNotPresent},
		"given": {
			args:        []string{"--%s-pull-policy=Always", "--%s-pull-secrets=regcred,mirror"},
			wantPolicy:  corev1.PullAlways,
			wantSecrets: []corev1.LocalObjectReference{{Name: "regcred"}, {Name: "mirror"}},
		},
		"empty secrets, as a chart without any passes them": {
			args: []string{"--%s-pull-secrets="}, wantPolicy: corev1.PullIfNotPresent,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			mgr, node := &managerFlags{}, &csiNodeFlags{}
			parse(t, mgr.register, tc.args, "server-image")
			parse(t, node.register, tc.args, "mount-image")
			for _, err := range []error{mgr.serverPull.validate(), node.mountPull.validate()} {
				if err != nil {
					t.Fatal(err)
				}
			}
			opts := mgr.options().Instance
			pod := node.newMounter(nil).(*mounter.Pod)
			got := map[string]any{
				"server policy": opts.ServerImagePullPolicy, "server secrets": opts.ServerImagePullSecrets,
				"mount policy": pod.PullPolicy, "mount secrets": pod.PullSecrets,
			}
			want := map[string]any{
				"server policy": tc.wantPolicy, "server secrets": tc.wantSecrets,
				"mount policy": tc.wantPolicy, "mount secrets": tc.wantSecrets,
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("pull settings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPullPolicyValidate: a policy the API server would refuse for every
// pod is refused when the manager or the node plugin starts.
func TestPullPolicyValidate(t *testing.T) {
	for policy, ok := range map[string]bool{"Always": true, "IfNotPresent": true, "Never": true, "": false, "always": false, "Sometimes": false} {
		f := pullFlags{flag: "server-image", policy: policy}
		err := f.validate()
		if (err == nil) != ok || err != nil && exitCode(err) != exitBadInput {
			t.Errorf("validate(%q) = %v (exit %d), want ok %t or exit %d", policy, err, exitCode(err), ok, exitBadInput)
		}
	}
}

// parse registers a command's flags and parses args, each with %s standing
// for the image flag's prefix.
func parse(t *testing.T, register func(*pflag.FlagSet), args []string, prefix string) {
	t.Helper()
	fl := pflag.NewFlagSet(prefix, pflag.ContinueOnError)
	register(fl)
	var given []string
	for _, a := range args {
		given = append(given, fmt.Sprintf(a, prefix))
	}
	if err := fl.Parse(given); err != nil {
		t.Fatal(err)
	}
}
