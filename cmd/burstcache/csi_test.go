package main

import "testing"

func TestCSINodeFlagsValidate(t *testing.T) {
	base := func() csiNodeFlags {
		return csiNodeFlags{
			nodeName: "node-1", mounter: "pod", mountImage: "burstcache:v1", mountNamespace: "burstcache-system",
			stateDir: "/var/lib/kubelet/plugins/csi.burstcache.io/state", kubeletDir: "/var/lib/kubelet", bin: "/bin/burstcache",
			mountPull: pullFlags{flag: "mount-image", policy: "IfNotPresent"},
		}
	}
	tests := map[string]struct {
		edit    func(*csiNodeFlags)
		wantErr bool
	}{
		"pod defaults":               {edit: func(*csiNodeFlags) {}},
		"process":                    {edit: func(f *csiNodeFlags) { f.mounter, f.mountImage, f.stateDir = "process", "", "/tmp/state" }},
		"no node name":               {edit: func(f *csiNodeFlags) { f.nodeName = "" }, wantErr: true},
		"unknown mounter":            {edit: func(f *csiNodeFlags) { f.mounter = "fork" }, wantErr: true},
		"pod without image":          {edit: func(f *csiNodeFlags) { f.mountImage = "" }, wantErr: true},
		"pod without namespace":      {edit: func(f *csiNodeFlags) { f.mountNamespace = "" }, wantErr: true},
		"pod state outside kubelet":  {edit: func(f *csiNodeFlags) { f.stateDir = "/var/lib/burstcache" }, wantErr: true},
		"pod state climbing out":     {edit: func(f *csiNodeFlags) { f.stateDir = "/var/lib/kubelet/../x" }, wantErr: true},
		"process without binary":     {edit: func(f *csiNodeFlags) { f.mounter, f.bin = "process", "" }, wantErr: true},
		"pod with a bad pull policy": {edit: func(f *csiNodeFlags) { f.mountPull.policy = "Sometimes" }, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := base()
			tc.edit(&f)
			err := f.validate()
			if (err != nil) != tc.wantErr {
				t.Fatalf("validate() = %v, want error %t", err, tc.wantErr)
			}
			if err != nil && exitCode(err) != exitBadInput {
				t.Fatalf("validate() exit code %d, want %d", exitCode(err), exitBadInput)
			}
		})
	}
}
