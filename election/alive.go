package election

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// A leader that dies without resigning (SIGKILL, an out-of-memory kill, a
// panic) keeps its term until its lease expires: up to --election-ttl,
// and etcd checks for expired leases only twice a second. Its process
// being gone is visible much sooner: the kernel closes its sockets, and
// its address refuses new connections. So each follower holds a request
// open to the leader's API (AlivePath) while it follows; when that
// request ends and a new connection to the same address is refused, the
// follower revokes the leader's lease itself, which ends the term at once
// (the fence on every etcd commit and the election ID at the switches
// hold as for an expired lease).
//
// Only a refusal counts, and only after the follower held a request to
// that same term's leader: a leader that stops answering (its host down,
// the network cut) keeps its term until the lease expires, as before, and
// an address this follower never reached (a wrong --advertise-url) is
// never taken for a gone leader.

// AlivePath is the leader's endpoint that followers hold open while it
// leads (AliveHandler).
const AlivePath = "/leaderz"

// AliveHandler answers GET AlivePath?election_id=N: while this replica
// leads term N (any term without the parameter), a line of JSON
// {"election_id":N,"leader":URL} and then nothing but a newline every 15
// s, until the term ends, the client goes, or done is closed (the server
// stopping); otherwise 409 at once.
func (l *Leadership) AliveHandler(done <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t := l.Term()
		want := r.URL.Query().Get("election_id")
		if t == nil || (want != "" && want != strconv.FormatUint(t.ID, 10)) {
			msg := "this replica does not lead"
			if want != "" {
				msg += " term " + want
			}
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusConflict)
			// The API's problem shape (api.Problem; election sits below
			// api, see internal/layout).
			_ = json.NewEncoder(w).Encode(map[string]any{"type": "about:blank", "title": http.StatusText(http.StatusConflict), "status": http.StatusConflict, "detail": msg})
			return
		}
		// The request lasts the term: lift the server's deadlines.
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Time{})
		_ = rc.SetWriteDeadline(time.Time{})
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		l.mu.Lock()
		self := l.self
		l.mu.Unlock()
		if json.NewEncoder(w).Encode(map[string]any{"election_id": t.ID, "leader": self}) != nil || rc.Flush() != nil {
			return
		}
		keepalive := time.NewTicker(15 * time.Second)
		defer keepalive.Stop()
		for {
			select {
			case <-t.Context().Done():
				return
			case <-r.Context().Done():
				return
			case <-done:
				return
			case <-keepalive.C:
				if _, err := io.WriteString(w, "\n"); err != nil || rc.Flush() != nil {
					return
				}
			}
		}
	}
}

// WatchLeader makes this replica, while it follows, hold a request open to
// the leader's AlivePath over rt (nil: http.DefaultTransport) and end the
// term of a leader whose process is gone (see AlivePath). Call it before
// Run.
func (l *Leadership) WatchLeader(rt http.RoundTripper) {
	if rt == nil {
		rt = http.DefaultTransport
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.watch = &http.Client{Transport: rt}
}

// errNotLeading: the replica at the leader's URL says it does not lead
// the term observed (etcd will show who does).
var errNotLeading = errors.New("the replica at that address does not lead that term")

// watchLeader follows one term of another replica (its election key kv)
// until ctx ends: it holds AlivePath open and, when the leader's address
// refuses connections after a request to it was held, revokes the term's
// lease.
func (l *Leadership) watchLeader(ctx context.Context, kv *mvccpb.KeyValue) {
	url, id := string(kv.Value), uint64(kv.CreateRevision)
	held := false // a request to this term's leader was held at some time
	first := sync.OnceFunc(func() {
		l.log.Info("watching the leader: a request to its "+AlivePath+" is held", "leader", url, "election_id", id)
	})
	backoff, notYet, quick, refusals, soon := l.watchBackoff, l.watchBackoff/10, 0, 0, 0
	for ctx.Err() == nil {
		began, heldNow := time.Now(), false
		err := l.holdLeader(ctx, url, id, func() { held, heldNow = true, true; first() })
		if ctx.Err() != nil {
			return
		}
		if heldNow {
			refusals = 0
		}
		l.log.Debug("leader watch", "leader", url, "election_id", id, "err", err)
		var wait time.Duration
		switch {
		case held && (errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, errNotLeading)):
			// The process that led this term has gone: its address
			// refuses, or another process there does not lead it. Once
			// more, a moment later (a refusal is not taken on one
			// packet); then end the term.
			if refusals++; refusals < 2 {
				wait = 50 * time.Millisecond
				break
			}
			if l.endGoneTerm(ctx, kv) {
				return
			}
			wait, backoff = backoff, min(2*backoff, 30*time.Second) // etcd cannot say: ask again later
		case errors.Is(err, errNotLeading):
			// Not yet: etcd shows a new term before its leader has begun
			// it. (A stale observation ends with the next one.)
			wait, notYet = notYet, min(2*notYet, 30*time.Second)
		case heldNow && time.Since(began) >= time.Second:
			// A held request ended: does its address still answer? At
			// once, and then every 50 ms for a second: a dying process's
			// listener may still take a connection it never answers
			// (closed a moment later), which is not yet a refusal.
			quick, backoff, soon = 0, l.watchBackoff, 20
		case heldNow && quick < 3:
			quick, soon = quick+1, 20
		case soon > 0:
			wait, soon = 50*time.Millisecond, soon-1
		default: // not reached, or ending as soon as held: a proxy, not the leader's process
			wait, backoff = backoff, min(2*backoff, 30*time.Second)
		}
		if wait == 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// holdLeader makes one request to the leader's AlivePath and holds it
// until it ends; held is called once the leader has answered that it
// leads term id. The error says how it ended.
func (l *Leadership) holdLeader(ctx context.Context, url string, id uint64, held func()) error {
	l.mu.Lock()
	client := l.watch
	l.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(url, "/")+AlivePath+"?election_id="+strconv.FormatUint(id, 10), nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusConflict {
		return errNotLeading
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", AlivePath, resp.Status)
	}
	var hello struct {
		ElectionID uint64 `json:"election_id"`
	}
	dec := json.NewDecoder(resp.Body)
	if err := dec.Decode(&hello); err != nil {
		return fmt.Errorf("%s's first line: %w", AlivePath, err)
	}
	if hello.ElectionID != id {
		return errNotLeading
	}
	held()
	l.watchHeld.Set(1)
	defer l.watchHeld.Set(0)
	_, err = io.Copy(io.Discard, resp.Body)
	if err == nil {
		err = io.EOF
	}
	return err
}

// endGoneTerm revokes the lease of the term kv, whose leader's process is
// gone, if etcd still shows that term; it says whether the term is over
// (false: etcd could not say, or the revoke failed).
func (l *Leadership) endGoneTerm(ctx context.Context, kv *mvccpb.KeyValue) bool {
	url, id := string(kv.Value), uint64(kv.CreateRevision)
	// Not cut short by the revoke's own effect: the key's deletion is
	// observed, and that ends ctx, maybe before the answer is read. And
	// not by a busy etcd: a revoke that timed out may still be applied,
	// and the next look would find the term over without having counted
	// it (seen under -race beside CPU burners with 2 s).
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	resp, err := l.cli.Get(cctx, string(kv.Key))
	if err != nil {
		return false
	}
	if len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != kv.CreateRevision {
		return true // over already: resigned, expired
	}
	if _, err := l.cli.Revoke(cctx, clientv3.LeaseID(kv.Lease)); errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return true // expired meanwhile
	} else if err != nil {
		l.log.Debug("revoke a gone leader's lease", "election_id", id, "err", err)
		return false
	}
	l.goneEnded.Inc()
	l.log.Warn("the leader's process is gone (its API refuses connections): its term ended now rather than when its lease expires",
		"election_id", id, "leader", url)
	return true
}

// termWatch is the watchLeader running for the term observed last (rev,
// its create revision), kept across Observe's restarts.
type termWatch struct {
	rev  int64
	stop func() // ends the watcher and waits for it; nil if none runs
}

func (w *termWatch) end() {
	if w.stop != nil {
		w.stop()
		w.stop = nil
	}
}

// observe follows who leads (Observe on e) until ctx ends or Observe
// gives up: it records the leader's URL and, when leaders are watched,
// keeps w's watcher on the term observed.
func (l *Leadership) observe(ctx context.Context, e *concurrency.Election, w *termWatch) {
	for resp := range e.Observe(ctx) {
		if len(resp.Kvs) == 0 {
			continue
		}
		kv := resp.Kvs[0]
		l.setLeader(string(kv.Value))
		if kv.CreateRevision == w.rev {
			continue
		}
		w.end()
		w.rev = kv.CreateRevision
		l.mu.Lock()
		watch, self := l.watch != nil, l.self
		l.mu.Unlock()
		if !watch || string(kv.Value) == self {
			continue
		}
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		w.stop = func() { cancel(); <-done }
		go func() { defer close(done); l.watchLeader(wctx, kv) }()
	}
}
