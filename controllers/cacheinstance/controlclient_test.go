package cacheinstance

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/cacheserver/control"
)

// TestServerProtocolComesFromThePod checks that the manager holds the pods
// it makes to the protocol of its release, and calls the servers of pods
// that earlier managers made, or that an admin marked, as their pods say.
func TestServerProtocolComesFromThePod(t *testing.T) {
	for name, tc := range map[string]struct {
		annotations map[string]string
		want        control.Protocol
		wantErr     bool
	}{
		"a pod this manager made":               {annotations: map[string]string{cachev1alpha1.AnnotationControlProtocol: "4"}, want: control.ProtocolAddressed},
		"a pod of the release before":           {annotations: map[string]string{cachev1alpha1.AnnotationControlProtocol: "3"}, want: control.ProtocolSigned},
		"a pod of an earlier manager":           {want: control.ProtocolSignedCalls},
		"a pod marked of the first release":     {annotations: map[string]string{cachev1alpha1.AnnotationControlProtocol: "1"}, want: control.ProtocolBearer},
		"a protocol this release does not know": {annotations: map[string]string{cachev1alpha1.AnnotationControlProtocol: "5"}, wantErr: true},
		"no protocol at all":                    {annotations: map[string]string{cachev1alpha1.AnnotationControlProtocol: ""}, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "run42-server-0", Annotations: tc.annotations}}
			got, err := serverProtocol(pod)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("serverProtocol = %v, %v; want %v (an error: %t)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
