package hint

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// ErrInvalid is matched by the error of a request that cannot be run as
// written.
var ErrInvalid = errors.New("invalid request")

// maxIDLength bounds request ids, as status.lastRequest.id does.
const maxIDLength = 253

// maxPathLength bounds request paths: a path that the kernel takes has at
// most PATH_MAX bytes, its terminating NUL included, and this one is below
// the instance's root besides.
const maxPathLength = 4095

// Parse decodes the value of the request annotation and checks it. The
// returned request's path is clean and relative to the instance root ("" is
// the root). The request is returned as far as it was understood even when
// it is refused, so that its id can be reported.
func Parse(value string) (cachev1alpha1.RequestSpec, error) {
	var req cachev1alpha1.RequestSpec
	dec := json.NewDecoder(strings.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("%w: decoding %s: %w", ErrInvalid, cachev1alpha1.AnnotationRequest, err)
	}
	if req.ID == "" || len(req.ID) > maxIDLength {
		return req, fmt.Errorf("%w: id must be 1 to %d characters", ErrInvalid, maxIDLength)
	}
	switch req.Operation {
	case cachev1alpha1.RequestFlush, cachev1alpha1.RequestEvict, cachev1alpha1.RequestInvalidate, cachev1alpha1.RequestPreload:
	default:
		return req, fmt.Errorf("%w: operation %q is not flush, evict, invalidate or preload", ErrInvalid, req.Operation)
	}
	p, err := CleanPath(req.Path)
	req.Path = p
	return req, err
}

// CleanPath cleans a path relative to the instance root and refuses one
// that would leave the instance: an absolute path, or one that climbs out
// with "..". The root itself is "".
func CleanPath(p string) (string, error) {
	if strings.HasPrefix(p, "/") {
		return p, fmt.Errorf("%w: path %q is absolute; give it relative to the instance's root", ErrInvalid, p)
	}
	if strings.ContainsRune(p, 0) {
		return p, fmt.Errorf("%w: path contains a NUL byte", ErrInvalid)
	}
	if len(p) > maxPathLength {
		return p, fmt.Errorf("%w: path is %d bytes long, and one below the instance's root has at most %d (PATH_MAX)", ErrInvalid, len(p), maxPathLength)
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return p, fmt.Errorf("%w: path %q leaves the instance", ErrInvalid, p)
	}
	if c == "." {
		return "", nil
	}
	return c, nil
}

// Encode returns the annotation value of req.
func Encode(req cachev1alpha1.RequestSpec) (string, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return "", fmt.Errorf("encoding the request: %w", err)
	}
	return string(b), nil
}
