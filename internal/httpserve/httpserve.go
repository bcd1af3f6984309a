// Package httpserve is the HTTP serving every binary shares: the server's
// time and size limits, a guard on the connections a listener holds, a
// serve loop that stops gracefully, and the probe containers use as their
// health check. It links no part of the controller, so the emulator's
// binary serves its control API with it too.
package httpserve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Server limits: a client has HeaderTimeout to send its headers and
// ReadTimeout for the whole request, an answer WriteTimeout to go out
// (event streams lift it for themselves), an idle keep-alive connection
// is closed after IdleTimeout, and headers are at most MaxHeaderBytes. So
// slow or idle clients, however many, hold nothing for long; the Guard
// bounds how many there are at once.
const (
	HeaderTimeout  = 10 * time.Second
	ReadTimeout    = 30 * time.Second
	WriteTimeout   = 60 * time.Second
	IdleTimeout    = 2 * time.Minute
	MaxHeaderBytes = 64 << 10
)

// NewServer is an HTTP server for handler with the limits above.
func NewServer(handler http.Handler, tlsConfig *tls.Config) *http.Server {
	return &http.Server{Handler: handler, TLSConfig: tlsConfig, ReadHeaderTimeout: HeaderTimeout,
		ReadTimeout: ReadTimeout, WriteTimeout: WriteTimeout, IdleTimeout: IdleTimeout, MaxHeaderBytes: MaxHeaderBytes}
}

// Serve serves srv on lis until ctx ends, then shuts it down, giving
// requests in flight up to three seconds (shutdownGrace); those still
// running then are cut, and that is logged, not an error: the stop was
// asked for, and a process that exits non-zero after SIGTERM reads as a
// crash (a slow admission's client retries with its Idempotency-Key).
func Serve(ctx context.Context, srv *http.Server, lis net.Listener, log *slog.Logger) error {
	errc := make(chan error, 1)
	go func() {
		if srv.TLSConfig != nil {
			errc <- srv.ServeTLS(lis, "", "") // certificates from TLSConfig
			return
		}
		errc <- srv.Serve(lis)
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if errors.Is(err, context.DeadlineExceeded) {
		log.Warn("requests still running when the HTTP server stopped were cut", "grace", shutdownGrace)
		err = srv.Close()
	}
	if serveErr := <-errc; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}

// shutdownGrace is how long requests in flight may finish at a stop.
const shutdownGrace = 3 * time.Second

// Probe GETs url and returns nil if it answers 200 within timeout: the
// health check of containers that have no curl. An https URL is not
// verified (the check is that the server answers, from its own host).
func Probe(url string, timeout time.Duration) error {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // a local liveness probe
	c := &http.Client{Timeout: timeout, Transport: tr}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	return nil
}
