package control

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"syscall"
	"time"
)

// Service is what a cache server provides through the control API. Its
// methods are called concurrently.
type Service interface {
	// Flush writes back every dirty byte and returns the dirty bytes left,
	// with an error if it could not finish.
	Flush(ctx context.Context) (remaining int64, err error)
	// Drain makes new writes fail with EROFS, then flushes.
	Drain(ctx context.Context) (remaining int64, err error)
	// Discard makes new writes fail with EROFS and has the server remove
	// its cache files, dirty data included, when it is stopped: the
	// teardown of its instance goes past the data not written back, as
	// its owner asked.
	Discard(ctx context.Context) error
	// RemoveHidden removes from the backing store the hidden names of
	// files unlinked while open that the server recorded, left by mounts
	// that ended before they closed the files, gives files hidden for
	// renames that failed their names back, and says what it did, also
	// when it failed. Only a teardown calls it, once nothing mounts the
	// instance and every server is drained.
	RemoveHidden(ctx context.Context) (HiddenResult, error)
	FlushPath(ctx context.Context, path string) error
	EvictPath(ctx context.Context, path string) error
	InvalidatePath(ctx context.Context, path string) error
	// Preload copies up the server's share of the extents under path and
	// returns how many bytes that share holds. What it cannot read under
	// path it passes over, and names in the error it returns once it
	// copied up the rest.
	Preload(ctx context.Context, path string) (bytes int64, err error)
	Stats(ctx context.Context) (Stats, error)
	SetTunables(ctx context.Context, t Tunables) error
	// Ready reports whether the data path is being served.
	Ready() bool
}

// Handler is the HTTP handler of the control API.
type Handler struct {
	http.Handler
	auth *authenticator // nil without a secret
}

// Refused returns how many calls the handler refused for their signature.
func (h *Handler) Refused() uint64 {
	if h.auth == nil {
		return 0
	}
	return h.auth.refused.Load()
}

// HandlerConfig configures a Handler.
type HandlerConfig struct {
	// Secret, when set, is the shared secret that calls must be signed
	// with (see authScheme).
	Secret []byte
	// ServedCalls, with a Secret, is the file in which the handler records
	// the calls that change something it served, before it serves them,
	// and from which a handler of the server's next process learns to
	// refuse them (see servedLog): a file in the server's cache directory,
	// which outlives the process. Empty, the handler refuses the calls
	// signed shortly before it started instead, and serves again those
	// that a caller whose clock runs ahead signed (see startSlack).
	ServedCalls string
	// Index is the server's index in its instance: a call that names a
	// server (ProtocolAddressed) is served only if its signature names
	// this one, so that a call seen on its way to another server of the
	// instance, which holds the same secret, is no call to this one.
	Index int
	// RefuseUnaddressed refuses the calls that name no server, those of
	// callers of the protocols before ProtocolAddressed. The manager asks
	// for it in the pods it makes, whose servers it calls with
	// ProtocolAddressed; a server that serves such calls can be sent, by
	// whoever saw one on its way to another server of the instance, a
	// call of an earlier caller that was meant for that one.
	RefuseUnaddressed bool
	Log               *slog.Logger
}

// NewHandler returns the HTTP handler of the control API over svc. With a
// secret, it serves only calls signed with it (see authScheme), but for the
// health and readiness probes. It keeps the calls it served in memory (see
// HandlerConfig.ServedCalls).
func NewHandler(svc Service, secret []byte, log *slog.Logger) *Handler {
	h, _ := NewHandlerOf(svc, HandlerConfig{Secret: secret, Log: log}) // no file, no error
	return h
}

// NewHandlerOf returns the HTTP handler of the control API over svc as cfg
// says. It fails when it cannot read or write cfg.ServedCalls.
func NewHandlerOf(svc Service, cfg HandlerConfig) (*Handler, error) {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	h := &handler{svc: svc, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/flush", h.flush(svc.Flush, "flush"))
	mux.HandleFunc("POST /v1/drain", h.flush(svc.Drain, "drain"))
	mux.HandleFunc("POST /v1/discard", h.discard)
	mux.HandleFunc("POST /v1/hidden/remove", h.removeHidden)
	mux.HandleFunc("POST /v1/paths/flush", h.path(svc.FlushPath))
	mux.HandleFunc("POST /v1/paths/evict", h.path(svc.EvictPath))
	mux.HandleFunc("POST /v1/paths/invalidate", h.path(svc.InvalidatePath))
	mux.HandleFunc("POST /v1/paths/preload", h.preload)
	mux.HandleFunc("GET /v1/stats", h.stats)
	mux.HandleFunc("PUT /v1/tunables", h.tunables)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", h.ready)
	if len(cfg.Secret) == 0 {
		return &Handler{Handler: mux}, nil
	}
	var served *servedLog
	if cfg.ServedCalls != "" {
		var err error
		if served, err = openServedLog(cfg.ServedCalls, time.Now()); err != nil {
			return nil, err
		}
	}
	a := newAuthenticator(cfg, served, log)
	return &Handler{Handler: a.wrap(mux), auth: a}, nil
}

// Close closes the file of the calls served. The handler must not serve
// calls after it.
func (h *Handler) Close() error {
	if h.auth == nil || h.auth.served == nil {
		return nil
	}
	return h.auth.served.close()
}

type handler struct {
	svc Service
	log *slog.Logger
}

func (h *handler) flush(fn func(context.Context) (int64, error), op string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h.log.Info("Flushing on request", "op", op)
		remaining, err := fn(r.Context())
		if err != nil {
			h.log.Error("Flush incomplete", "op", op, "remainingBytes", remaining, "err", err)
			body := errorBody(err)
			body.RemainingBytes = remaining
			writeJSON(w, http.StatusInternalServerError, body)
			return
		}
		writeJSON(w, http.StatusOK, FlushResult{RemainingBytes: remaining})
	}
}

func (h *handler) discard(w http.ResponseWriter, r *http.Request) {
	h.log.Info("Discarding on request: the cache files go when the server stops, dirty data included")
	if err := h.svc.Discard(r.Context()); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

func (h *handler) removeHidden(w http.ResponseWriter, r *http.Request) {
	res, err := h.svc.RemoveHidden(r.Context())
	if err != nil {
		body := errorBody(err)
		body.Removed, body.GivenBack = res.Removed, res.GivenBack
		writeJSON(w, http.StatusInternalServerError, body)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (h *handler) path(fn func(context.Context, string) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req PathRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeJSON(w, http.StatusBadRequest, ErrorBody{Error: err.Error(), Errno: int(syscall.EINVAL)})
			return
		}
		if err := fn(r.Context(), string(req.Path)); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, struct{}{})
	}
}

func (h *handler) preload(w http.ResponseWriter, r *http.Request) {
	var req PathRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, ErrorBody{Error: err.Error(), Errno: int(syscall.EINVAL)})
		return
	}
	n, err := h.svc.Preload(r.Context(), string(req.Path))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, PreloadResult{Bytes: n})
}

func (h *handler) stats(w http.ResponseWriter, r *http.Request) {
	st, err := h.svc.Stats(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (h *handler) tunables(w http.ResponseWriter, r *http.Request) {
	var t Tunables
	if err := json.NewDecoder(r.Body).Decode(&t); err != nil {
		writeJSON(w, http.StatusBadRequest, ErrorBody{Error: err.Error(), Errno: int(syscall.EINVAL)})
		return
	}
	if err := h.svc.SetTunables(r.Context(), t); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

func (h *handler) ready(w http.ResponseWriter, _ *http.Request) {
	if !h.svc.Ready() {
		http.Error(w, "not serving", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

func errorBody(err error) ErrorBody {
	body := ErrorBody{Error: err.Error()}
	var e syscall.Errno
	if errors.As(err, &e) {
		body.Errno = int(e)
	}
	return body
}

func writeError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	body := errorBody(err)
	switch syscall.Errno(body.Errno) {
	case syscall.ENOENT:
		status = http.StatusNotFound
	case syscall.EINVAL:
		status = http.StatusBadRequest
	case syscall.EACCES, syscall.EPERM:
		status = http.StatusForbidden
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
