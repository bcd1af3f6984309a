package fabrictest_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/httpserve"
)

// TestSlowClientsCannotHoldTheServer: the API's server (the limits of
// httpserve.NewServer, shortened) closes a few hundred clients that send
// half a request and stop — headers or body — while it goes on answering
// others; a server-sent event stream outlives those limits.
func TestSlowClientsCannotHoldTheServer(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(1, 2, 1))
	srv := httpserve.NewServer(h.Stack.Handler, nil)
	srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout = 500*time.Millisecond, time.Second, time.Second, time.Second
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- httpserve.Serve(ctx, srv, lis, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() { cancel(); <-done })
	addr := lis.Addr().String()

	const slow = 300
	conns := make([]net.Conn, 0, slow)
	for i := range slow {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		half := "GET /api/v1/topology HTTP/1.1\r\nHost: x\r\n" // headers never end
		if i%2 == 1 {
			half = "POST /api/v1/intents HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"na" // body never ends
		}
		if _, err := io.WriteString(c, half); err != nil {
			t.Fatal(err)
		}
	}
	// The server answers others meanwhile.
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz beside %d slow clients: %v %v", slow, resp, err)
	}
	resp.Body.Close()
	// And it closes every slow one (it may answer 408 first).
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(fabrictest.Backstop(30 * time.Second)))
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Fatalf("slow client %d not closed by the server: %v", i, err)
		}
		c.Close()
	}

	// An event stream outlives the read and write timeouts: it keeps
	// delivering past three of them.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/api/v1/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	start := time.Now()
	events := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for time.Since(start) < 3*srv.ReadTimeout && sc.Scan() {
		if strings.HasPrefix(sc.Text(), "event: topology") {
			events++
		}
	}
	if time.Since(start) < 3*srv.ReadTimeout {
		t.Fatalf("the stream ended after %v and %d events: %v", time.Since(start).Round(time.Millisecond), events, fmt.Sprint(sc.Err()))
	}
}
