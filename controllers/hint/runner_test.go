package hint

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

func TestFinal(t *testing.T) {
	down := errors.New("connection refused")
	tests := map[string]struct {
		op        cachev1alpha1.RequestOperation
		err       error
		wantFinal bool
	}{
		"malformed":                        {op: cachev1alpha1.RequestEvict, err: fmt.Errorf("x: %w", ErrInvalid), wantFinal: true},
		"preload of a missing path":        {op: cachev1alpha1.RequestPreload, err: fmt.Errorf("server-0: %w", syscall.ENOENT), wantFinal: true},
		"preload runAs may not read":       {op: cachev1alpha1.RequestPreload, err: syscall.EACCES, wantFinal: true},
		"server down":                      {op: cachev1alpha1.RequestPreload, err: down},
		"flush whose write-back is denied": {op: cachev1alpha1.RequestFlush, err: fmt.Errorf("write back: %w", syscall.EACCES)},
		"flush of a missing path":          {op: cachev1alpha1.RequestFlush, err: syscall.ENOENT},
		"one server down, one missing":     {op: cachev1alpha1.RequestInvalidate, err: errors.Join(down, syscall.ENOENT), wantFinal: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Final(tc.op, tc.err); got != tc.wantFinal {
				t.Errorf("Final(%s, %v) = %v, want %v", tc.op, tc.err, got, tc.wantFinal)
			}
		})
	}
}
