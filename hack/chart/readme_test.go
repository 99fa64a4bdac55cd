package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseValueDocs(t *testing.T) {
	for name, tc := range map[string]struct {
		values   string
		wantDocs []valueDoc
		wantErr  string
	}{
		"sections, multi-line docs and opaque blocks": {
			values: "image:\n  # -- Repository.\n  # Second line.\n  repository: x\n" +
				"# -- Resources.\nresources:\n  limits:\n    memory: 1Gi\n# -- Tolerations.\ntolerations:\n- operator: Exists\n",
			wantDocs: []valueDoc{{"image.repository", "Repository. Second line."}, {"resources", "Resources."}, {"tolerations", "Tolerations."}},
		},
		"an undocumented value is an error": {
			values:  "image:\n  # -- Repository.\n  repository: x\n  tag: dev\n",
			wantErr: "image.tag has no",
		},
	} {
		t.Run(name, func(t *testing.T) {
			docs, err := parseValueDocs([]byte(tc.values))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantDocs, docs, cmp.AllowUnexported(valueDoc{})); diff != "" {
				t.Errorf("docs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExpandSentinels(t *testing.T) {
	in := "metadata:\n  labels:\n    __LINE__labels: \"\"\n    a: b\nspec:\n  replicas: __INLINE__managerReplicas\n  resources: __BLOCK__managerResources\n"
	want := "metadata:\n  labels:\n    {{- include \"burstcache.labels\" . | nindent 4 }}\n    a: b\n" +
		"spec:\n  replicas: {{ .Values.manager.replicas }}\n  resources: {{- toYaml .Values.manager.resources | nindent 4 }}\n"
	if diff := cmp.Diff(want, expandSentinels(in)); diff != "" {
		t.Errorf("expandSentinels (-want +got):\n%s", diff)
	}
}
