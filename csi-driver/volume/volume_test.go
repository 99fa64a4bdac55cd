package volume

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestParseID(t *testing.T) {
	tests := map[string]struct {
		id            string
		wantNamespace string
		wantName      string
		wantErr       bool
	}{
		"instance":            {id: "team-a/train", wantNamespace: "team-a", wantName: "train"},
		"dotted name":         {id: "ns/pvc-1.a", wantNamespace: "ns", wantName: "pvc-1.a"},
		"no namespace":        {id: "train", wantErr: true},
		"empty name":          {id: "ns/", wantErr: true},
		"path in name":        {id: "ns/a/../b", wantErr: true},
		"upper case":          {id: "NS/x", wantErr: true},
		"traversal namespace": {id: "../x", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ns, n, err := ParseID(tc.id)
			if tc.wantErr {
				if !errors.Is(err, ErrBadID) {
					t.Fatalf("ParseID(%q) error = %v, want ErrBadID", tc.id, err)
				}
				return
			}
			if err != nil || ns != tc.wantNamespace || n != tc.wantName {
				t.Fatalf("ParseID(%q) = %q, %q, %v; want %q, %q", tc.id, ns, n, err, tc.wantNamespace, tc.wantName)
			}
			if got := ID(ns, n); got != tc.id {
				t.Fatalf("ID(%q, %q) = %q, want %q", ns, n, got, tc.id)
			}
		})
	}
}

func TestMountLeaseName(t *testing.T) {
	long := strings.Repeat("n", 200)
	names := map[string]bool{}
	for _, pair := range [][2]string{{"a", "node-1"}, {"a", "node-2"}, {long, "node-1"}, {long, "node-2"}, {"a", long}} {
		got := MountLeaseName(pair[0], pair[1])
		if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
			t.Errorf("MountLeaseName(%.20q, %.20q) = %q is not a valid name: %v", pair[0], pair[1], got, errs)
		}
		if names[got] {
			t.Errorf("MountLeaseName(%.20q, %.20q) = %q collides with another pair", pair[0], pair[1], got)
		}
		names[got] = true
	}
}

func TestInstanceName(t *testing.T) {
	pvc := "pvc-6f1c2b1e-2a59-4a3e-9d8a-0c61f5a1f3b7"
	if got := InstanceName(pvc); got != pvc {
		t.Errorf("InstanceName(%q) = %q, want it unchanged", pvc, got)
	}
	long := strings.Repeat("a", 128)
	for _, name := range []string{"Sanity-Volume-AC576148", long, "1-starts-with-a-digit", "dotted.name"} {
		got := InstanceName(name)
		if errs := validation.IsDNS1035Label(got + "-servers"); len(errs) > 0 {
			t.Errorf("InstanceName(%q) = %q: its Service name is not a DNS label: %v", name, got, errs)
		}
		if again := InstanceName(name); again != got {
			t.Errorf("InstanceName(%q) is %q, then %q", name, got, again)
		}
	}
	if InstanceName(long) == InstanceName(long+"b") {
		t.Error("two names share an instance")
	}
}
