package main

import "testing"

func TestParseSize(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    int64
		wantErr bool
	}{
		"bytes":     {in: "4096", want: 4096},
		"mebibytes": {in: "1Mi", want: 1 << 20},
		"gibibytes": {in: "10Gi", want: 10 << 30},
		"gigabytes": {in: "2G", want: 2e9},
		"empty":     {in: "", wantErr: true},
		"negative":  {in: "-1", wantErr: true},
		"garbage":   {in: "1Xi", wantErr: true},
		"overflow":  {in: "99999999999Ti", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseSize(tc.in)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("parseSize(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.wantErr)
			}
		})
	}
}
