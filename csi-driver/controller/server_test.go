package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/burstcache/burstcache/csi-driver/instances"
)

func TestGRPCError(t *testing.T) {
	// The API client's rate limiter fails a request that would outlast the
	// caller's deadline before the deadline passes, with this error.
	throttled := errors.New("client rate limiter Wait returned an error: rate: Wait(n=1) would exceed context deadline")
	tests := map[string]struct {
		err     error
		timeout time.Duration // of the caller's context; none if 0
		want    codes.Code
	}{
		"invalid":           {err: fmt.Errorf("parsing: %w", instances.ErrInvalid), want: codes.InvalidArgument},
		"not found":         {err: fmt.Errorf("named: %w", instances.ErrNotFound), want: codes.NotFound},
		"capacity":          {err: fmt.Errorf("pool: %w", instances.ErrNoCapacity), want: codes.ResourceExhausted},
		"conflict":          {err: instances.ErrConflict, want: codes.AlreadyExists},
		"busy":              {err: errBusy, want: codes.Aborted},
		"deleting":          {err: errDeleting, want: codes.Unavailable},
		"deadline":          {err: fmt.Errorf("get: %w", context.DeadlineExceeded), want: codes.DeadlineExceeded},
		"api failure":       {err: errors.New("connection refused"), want: codes.Internal},
		"api failure, time": {err: errors.New("connection refused"), timeout: time.Minute, want: codes.Internal},
		"throttled":         {err: throttled, timeout: 50 * time.Millisecond, want: codes.DeadlineExceeded},
		"not found, late":   {err: instances.ErrNotFound, timeout: time.Millisecond, want: codes.NotFound},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			got := grpcError(ctx, tc.err)
			if status.Code(got) != tc.want {
				t.Errorf("grpcError(%v) code = %v, want %v", tc.err, status.Code(got), tc.want)
			}
			if status.Convert(got).Message() != tc.err.Error() {
				t.Errorf("grpcError(%v) message = %q, want the error's", tc.err, status.Convert(got).Message())
			}
		})
	}
}

// TestConcurrentCallAborted holds a volume's lock as a call in progress
// would, and checks that another call on it answers Aborted without
// touching the API server (the server has no client: it would panic).
func TestConcurrentCallAborted(t *testing.T) {
	s := &controllerServer{locks: &volumeLocks{held: map[string]bool{}}}
	unlock, err := s.locks.lock("ns/vol")
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{VolumeId: "ns/vol"})
	if status.Code(err) != codes.Aborted {
		t.Fatalf("DeleteVolume during another call = %v, want Aborted", err)
	}
	mount := []*csi.VolumeCapability{{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
	}}
	if _, err := s.locks.lock("pvc-1"); err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: mount})
	if status.Code(err) != codes.Aborted {
		t.Fatalf("CreateVolume during another call = %v, want Aborted", err)
	}
	unlock()
	if _, err := s.locks.lock("ns/vol"); err != nil {
		t.Errorf("lock after unlock: %v", err)
	}
}

func TestCreateVolumeRefusesBadRequests(t *testing.T) {
	s := &controllerServer{locks: &volumeLocks{held: map[string]bool{}}}
	block := []*csi.VolumeCapability{{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}}
	tests := map[string]*csi.CreateVolumeRequest{
		"no name":         {VolumeCapabilities: block},
		"no capabilities": {Name: "pvc-1"},
		"block":           {Name: "pvc-1", VolumeCapabilities: block},
	}
	for name, req := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := s.CreateVolume(context.Background(), req); status.Code(err) != codes.InvalidArgument {
				t.Errorf("CreateVolume() = %v, want InvalidArgument", err)
			}
		})
	}
}
