package httpserve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// guarded serves a handler behind a Guard with lim on loopback: /trust
// marks its connection trusted (a valid token), /hold holds its request
// until released, /stream holds it as a long hold.
type guarded struct {
	addr    string
	g       *Guard
	release chan struct{}
	holding chan struct{}
}

func serveGuarded(t *testing.T, lim Limits) *guarded {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &guarded{addr: lis.Addr().String(), release: make(chan struct{}), holding: make(chan struct{}, 100)}
	s.g = NewGuard(lis, lim, "test", slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	mux := http.NewServeMux()
	mux.HandleFunc("/trust", func(w http.ResponseWriter, r *http.Request) { Trust(r.Context()) })
	mux.HandleFunc("/ping", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/hold", func(w http.ResponseWriter, r *http.Request) {
		s.holding <- struct{}{}
		<-s.release
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		defer LongHold(r.Context())()
		w.(http.Flusher).Flush()
		s.holding <- struct{}{}
		select {
		case <-s.release:
		case <-r.Context().Done():
		}
	})
	srv := NewServer(mux, nil)
	s.g.Attach(srv)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, srv, s.g, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() {
		select {
		case <-s.release:
		default:
			close(s.release)
		}
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return s
}

// client is one connection from source address from (127.0.0.x), speaking
// HTTP/1.1 by hand so the test decides when it is idle.
type client struct {
	net.Conn
	r *bufio.Reader
}

func (s *guarded) dial(t *testing.T, from string) *client {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{Conn: c, r: bufio.NewReader(c)}
}

// get sends a request on c and reads the answer's status line and
// headers (a long hold's body is not read).
func (c *client) get(path string) (int, error) {
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return 0, err
	}
	if resp.ContentLength >= 0 {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	return resp.StatusCode, nil
}

// closed says whether the server closed c (a read ends in EOF or a reset).
func (c *client) closed(t *testing.T) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	_, err := c.r.ReadByte()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return err != nil
}

// waitOpen waits until the guard holds n connections (accepting is
// asynchronous to the client's dial).
func (s *guarded) waitOpen(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.g.Open() != n {
		if time.Now().After(deadline) {
			t.Fatalf("the guard holds %d connections, want %d", s.g.Open(), n)
		}
		<-time.After(time.Millisecond)
	}
}

// TestGuardEvictsTheOldestIdleAnonymous: past a source's limit, the
// source's own oldest idle anonymous connection makes room; a trusted
// one and one in a request never do; past the listener's limit the same
// holds across sources; when nothing can make room the new connection is
// closed and counted.
func TestGuardEvictsTheOldestIdleAnonymous(t *testing.T) {
	s := serveGuarded(t, Limits{MaxConns: 6, MaxPerSource: 3})

	trusted := s.dial(t, "127.0.0.2")
	if code, err := trusted.get("/trust"); err != nil || code != 200 {
		t.Fatalf("trust: %d %v", code, err)
	}
	busy := s.dial(t, "127.0.0.2")
	go busy.get("/hold")
	<-s.holding
	oldest := s.dial(t, "127.0.0.2")
	s.waitOpen(t, 3)
	// A fourth from the same source: the idle anonymous one goes.
	fourth := s.dial(t, "127.0.0.2")
	if !oldest.closed(t) {
		t.Fatal("the oldest idle anonymous connection of the source was not closed for the new one")
	}
	if code, err := fourth.get("/ping"); err != nil || code != 200 {
		t.Fatalf("the new connection: %d %v", code, err)
	}
	if code, err := trusted.get("/ping"); err != nil || code != 200 {
		t.Fatalf("the trusted connection after the eviction: %d %v", code, err)
	}

	// The other sources fill the listener: 3 + 3 = 6.
	other := []*client{s.dial(t, "127.0.0.3"), s.dial(t, "127.0.0.3")}
	stream := s.dial(t, "127.0.0.4")
	streaming := make(chan error, 1)
	go func() { _, err := stream.get("/stream"); streaming <- err }()
	<-s.holding
	if err := <-streaming; err != nil { // its headers came: the reader is the test's again
		t.Fatal(err)
	}
	s.waitOpen(t, 6)
	// The listener is full: the idle anonymous connection of any source
	// that was active longest ago goes (fourth, the first source's).
	s.dial(t, "127.0.0.5")
	if !fourth.closed(t) {
		t.Fatal("the listener's oldest idle anonymous connection was not closed for the new one")
	}
	for range 3 {
		s.dial(t, "127.0.0.6")
	}
	// other[0], other[1] and then the anonymous stream (a long hold)
	// have made room, oldest first.
	for i, c := range other {
		if !c.closed(t) {
			t.Errorf("other[%d] still open", i)
		}
	}
	if !stream.closed(t) {
		t.Error("an anonymous long hold was not closed to make room")
	}
	if code, err := trusted.get("/ping"); err != nil || code != 200 {
		t.Errorf("the trusted connection after the flood: %d %v", code, err)
	}
	if testutil.ToFloat64(s.g.metrics.evicted) != 5 {
		t.Errorf("evicted %v, want 5", testutil.ToFloat64(s.g.metrics.evicted))
	}

	// Now: trusted and busy (127.0.0.2), 127.0.0.5 and three of
	// 127.0.0.6, all idle anonymous. Make those four busy: nothing can go.
	s.waitOpen(t, 6)
	s.g.mu.Lock()
	for c := range s.g.conns {
		c.busy.Add(1)
	}
	s.g.mu.Unlock()
	refused := s.dial(t, "127.0.0.7")
	if !refused.closed(t) {
		t.Fatal("a connection past the limit was not closed when nothing could make room")
	}
	if got := testutil.ToFloat64(s.g.metrics.refused.WithLabelValues("listener")); got != 1 {
		t.Errorf("refused{limit=listener} = %v, want 1", got)
	}
	if s.g.Open() != 6 {
		t.Errorf("open %d, want 6", s.g.Open())
	}
}
