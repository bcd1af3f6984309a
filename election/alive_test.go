package election

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/accelnet/accelnet/store/storetest"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// longTTL is a lease no test waits out: a follower that leads before it
// expires ended the old term itself.
const longTTL = 60 * time.Second

// runLeadership runs l until the returned stop is called.
func runLeadership(l *Leadership) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(ctx) }()
	return func() { cancel(); <-done }
}

// countingTransport counts the requests a watcher makes.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// TestFollowerEndsTheTermOfAGoneLeader: a follower holds a request to the
// leader's AlivePath; a request that ends while the leader's address still
// answers is made again, and nothing is revoked; when the leader's
// process is gone (its etcd client silent, its address refusing
// connections), the follower revokes its lease and leads, long before the
// lease would have expired.
func TestFollowerEndsTheTermOfAGoneLeader(t *testing.T) {
	t.Run("its address refuses", func(t *testing.T) { testGoneLeader(t, "refuses") })
	// A process restarted at once at the same address (systemd), which
	// does not lead.
	t.Run("another process answers", func(t *testing.T) { testGoneLeader(t, "restarted") })
	// A dying process's listener takes a connection it never answers,
	// then refuses: the follower asks again soon, not after its backoff
	// (an hour here).
	t.Run("its listener hangs first", func(t *testing.T) { testGoneLeader(t, "hangs") })
}

func testGoneLeader(t *testing.T, how string) {
	etcd := storetest.Embedded(t)
	cli, cliA := storetest.Client(t, etcd), storetest.Client(t, etcd)

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := NewLeadership(cliA, "http://"+lis.Addr().String(), longTTL, nil, nil)
	var requests atomic.Int64
	var serving atomic.Pointer[Leadership] // the process at a's address
	serving.Store(a)
	endFirst := make(chan struct{}) // ends the first held request, as a server-side timeout would
	killed := make(chan struct{})   // ends the requests held by the process that led
	var hang atomic.Bool
	var hung atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hang.Load() {
			hung.Add(1)
			<-r.Context().Done()
			return
		}
		done := killed
		if requests.Add(1) == 1 {
			done = endFirst
		}
		serving.Load().AliveHandler(done)(w, r)
		if hang.Load() {
			panic(http.ErrAbortHandler) // cut, as a killed process's connection is, not ended
		}
	})}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Close()
	stopA := runLeadership(a)
	defer stopA()
	waitFor(t, "a leads", func() bool { return a.Term() != nil })
	termA := a.Term()

	// Only the term asked about is answered as held.
	rec := httptest.NewRecorder()
	a.AliveHandler(nil)(rec, httptest.NewRequest(http.MethodGet, AlivePath+"?election_id="+strconv.FormatUint(termA.ID+1, 10), nil))
	if rec.Code != http.StatusConflict {
		t.Errorf("%s for a term a does not lead: %d, want 409", AlivePath, rec.Code)
	}

	b := NewLeadership(cli, "http://b", longTTL, nil, nil)
	if how == "hangs" {
		b.watchBackoff = time.Hour
	}
	b.WatchLeader(nil)
	stopB := runLeadership(b)
	defer stopB()
	waitFor(t, "b holds a request to a", func() bool { return testutil.ToFloat64(b.watchHeld) == 1 })

	close(endFirst)
	waitFor(t, "b holds a second request", func() bool { return requests.Load() >= 2 && testutil.ToFloat64(b.watchHeld) == 1 })
	if n := testutil.ToFloat64(b.goneEnded); n != 0 || b.Term() != nil || !b.Holds(context.Background(), termA) {
		t.Fatalf("a request that ended while a answered ended a's term (gone terms ended %v)", n)
	}

	// "kill -9" a: its etcd client stops renewing; its address refuses,
	// or a new process that does not lead answers there.
	cliA.Close()
	switch how {
	case "restarted":
		serving.Store(NewLeadership(cli, a.self, longTTL, nil, nil)) // not running: a follower
		close(killed)
	case "hangs":
		hang.Store(true)
		close(killed)
		waitFor(t, "b's request after the held one hangs", func() bool { return hung.Load() > 0 })
		srv.Close()
	default:
		srv.Close()
	}
	// b may lead (the key's deletion observed) a moment before the
	// revoke's answer reaches it and is counted.
	waitFor(t, "b leads, having ended a's term", func() bool { return b.Term() != nil && testutil.ToFloat64(b.goneEnded) >= 1 })
	if n := testutil.ToFloat64(b.goneEnded); n != 1 {
		t.Errorf("gone terms ended: %v, want 1", n)
	}
	if b.Term().ID <= termA.ID {
		t.Errorf("b's election ID %d not above a's %d", b.Term().ID, termA.ID)
	}
}

// TestLeaderWatchTakesNoRefusalItNeverHeld: a leader whose advertised
// address has refused every connection since this follower first tried it
// (a wrong --advertise-url, a firewall) is not taken for gone: the
// follower keeps trying and the term stands.
func TestLeaderWatchTakesNoRefusalItNeverHeld(t *testing.T) {
	_, cli := storetest.Etcd(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusing := "http://" + lis.Addr().String()
	lis.Close()

	a := NewLeadership(cli, refusing, longTTL, nil, nil)
	stopA := runLeadership(a)
	defer stopA()
	waitFor(t, "a leads", func() bool { return a.Term() != nil })
	termA := a.Term()

	b := NewLeadership(cli, "http://b", longTTL, nil, nil)
	b.watchBackoff = 5 * time.Millisecond
	var rt countingTransport
	b.WatchLeader(&rt)
	stopB := runLeadership(b)
	defer stopB()
	waitFor(t, "b tries a's address five times", func() bool { return rt.n.Load() >= 5 })
	if n := testutil.ToFloat64(b.goneEnded); n != 0 || a.Term() != termA || !b.Holds(context.Background(), termA) {
		t.Fatalf("a term ended over an address never reached (gone terms ended %v)", n)
	}
}

// TestLeaderWatchStopsWithTheTerm: a watcher of a term that ended (the
// leader resigned, its address still answering) ends nothing, and the
// next leader is watched by the remaining follower.
func TestLeaderWatchStopsWithTheTerm(t *testing.T) {
	_, cli := storetest.Etcd(t)
	var mu sync.Mutex
	seen := map[string]int{} // election_id asked for → requests
	serve := func(l *Leadership) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen[r.URL.Query().Get("election_id")]++
			mu.Unlock()
			l.AliveHandler(nil)(w, r)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	a := NewLeadership(cli, "", longTTL, nil, nil)
	a.SetSelf(serve(a))
	stopA := runLeadership(a)
	waitFor(t, "a leads", func() bool { return a.Term() != nil })

	b := NewLeadership(cli, "", longTTL, nil, nil)
	b.SetSelf(serve(b))
	b.WatchLeader(nil)
	stopB := runLeadership(b)
	defer stopB()
	c := NewLeadership(cli, "", longTTL, nil, nil)
	c.SetSelf(serve(c))
	c.WatchLeader(nil)
	stopC := runLeadership(c)
	defer stopC()
	waitFor(t, "b and c hold a request to a", func() bool {
		return testutil.ToFloat64(b.watchHeld) == 1 && testutil.ToFloat64(c.watchHeld) == 1
	})

	stopA() // resigns: b or c leads; the other watches it
	var next, other *Leadership
	waitFor(t, "b or c leads", func() bool {
		next, other = b, c
		if c.Term() != nil {
			next, other = c, b
		}
		return next.Term() != nil
	})
	waitFor(t, "the other holds a request to the next leader", func() bool { return testutil.ToFloat64(other.watchHeld) == 1 })
	mu.Lock()
	defer mu.Unlock()
	if id := strconv.FormatUint(next.Term().ID, 10); seen[id] == 0 {
		t.Errorf("no request for the next leader's term %s: %v", id, seen)
	}
	if n := testutil.ToFloat64(b.goneEnded) + testutil.ToFloat64(c.goneEnded); n != 0 {
		t.Errorf("a resigned leader's term taken as gone: %v", n)
	}
}
