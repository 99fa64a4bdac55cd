package driver

import (
	"context"
	"runtime/debug"
	"time"

	"github.com/go-logr/logr"
	"github.com/kubernetes-csi/csi-lib-utils/protosanitizer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// interceptor logs every call with the secrets of its request stripped, and
// turns the error a handler returns into a gRPC status: the one place where
// status codes are made. A handler that panics fails its call with Internal
// instead of taking the plugin, and the other calls, down.
func interceptor(log logr.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = status.Errorf(codes.Internal, "%s panicked: %v", info.FullMethod, r)
				log.Error(err, "Call panicked", "method", info.FullMethod, "stack", string(debug.Stack()))
			}
		}()
		log := log.WithValues("method", info.FullMethod)
		log.V(4).Info("Handling call", "request", protosanitizer.StripSecrets(req))
		start := time.Now()
		resp, err = handler(logr.NewContext(ctx, log), req)
		err = rpcError(err)
		if err != nil {
			log.Error(err, "Call failed", "code", status.Code(err).String(), "duration", time.Since(start))
			return nil, err
		}
		log.V(4).Info("Call succeeded", "response", protosanitizer.StripSecrets(resp), "duration", time.Since(start))
		return resp, nil
	}
}
