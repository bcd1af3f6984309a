package httpserve

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestServeCutsWhatOutlastsTheGrace: at a stop, a request that does
// not finish within the grace is cut and logged, and serving ends without
// an error (a process that exits non-zero after SIGTERM reads as a
// crash); a quick request is answered meanwhile.
func TestServeCutsWhatOutlastsTheGrace(t *testing.T) {
	started := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done() // until the connection is cut
	})
	mux.HandleFunc("/quick", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logged.Write(p)
	}), nil))
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, &http.Server{Handler: mux}, lis, log) }()
	base := "http://" + lis.Addr().String()

	resp, err := http.Get(base + "/quick")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	slow := make(chan error, 1)
	go func() {
		resp, err := http.Get(base + "/slow")
		if err == nil {
			resp.Body.Close()
		}
		slow <- err
	}()
	<-started
	stop()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("serving ended with %v; a stop that cut a request is not an error", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("serving did not end a minute after the stop")
	}
	if err := <-slow; err == nil {
		t.Error("the request still running after the grace was answered, not cut")
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logged.String(), "were cut") {
		t.Errorf("nothing logged about the cut request: %q", logged.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
