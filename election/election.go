// Package election decides which replica leads. A term is the create
// revision of the leader's election key in etcd: the same number is the
// P4Runtime election_id and gNMI master-arbitration ID at the switches and
// the fence on the leader's etcd commits, so a deposed leader is refused
// everywhere at once.
package election

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/accelnet/accelnet/store"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrNotLeader means this replica does not lead (or stopped leading while
// the request waited): only the leader decides admissions and programs
// switches.
var ErrNotLeader = errors.New("this replica is not the leader")

// Term is one tenure as leader. Its ID, the create revision of the
// leader's election key, is the P4Runtime election_id (and the gNMI
// master-arbitration ID): etcd revisions only grow, so every new leader
// outranks every earlier one at the switches, which refuse a deposed
// leader's writes even if it has not noticed yet.
type Term struct {
	ID     uint64
	Key    string
	Rev    int64
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// Context ends when the term does.
func (t *Term) Context() context.Context { return t.ctx }

// Fence is the etcd condition that the term still holds: leader-only
// writes carry it, so a leader whose lease expired cannot commit.
func (t *Term) Fence() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(t.Key), "=", t.Rev)
}

// Leader is what the parts that act only on the leader need to know.
type Leader interface {
	// Term is the current term, nil while following.
	Term() *Term
	// Changed is closed at the next change of role.
	Changed() <-chan struct{}
	// Leader is the leader's advertised API URL ("" if unknown) and
	// whether it is this replica.
	Leader() (url string, self bool)
	// StepDown gives up the term (a switch refused our election ID: a
	// newer leader exists); the replica campaigns again after a pause.
	StepDown(reason string)
	// Holds says whether etcd still shows term t as the leader's (its
	// election key at its revision): when a switch refuses our election
	// ID but etcd says we lead, the switch was taken by a controller that
	// is not one of our replicas, not by a newer leader. It answers true
	// when etcd cannot be asked (not the switch's business to depose us).
	Holds(ctx context.Context, t *Term) bool
}

// Leadership campaigns for this replica with etcd's election recipe and
// follows who leads.
type Leadership struct {
	cli  *clientv3.Client
	self string
	log  *slog.Logger

	// leaseTTL is the next lease's TTL in seconds: the configured one to
	// begin with, doubled after each lease that expired while it led
	// (leaseTTLFor); the campaign loop's alone.
	leaseTTL   int
	leaseGauge prometheus.Gauge

	leading  prometheus.Gauge
	terms    prometheus.Counter
	termID   prometheus.Gauge
	stepDown chan string

	// Watching the leader (alive.go): watchHeld is 1 while a request to
	// it is held, goneEnded counts terms of gone leaders this replica
	// ended.
	watchBackoff time.Duration
	watchHeld    prometheus.Gauge
	goneEnded    prometheus.Counter

	// grantTimeout is how long the next campaign waits for its lease to
	// be granted (see nextGrantTimeout); the campaign loop's alone.
	grantTimeout time.Duration

	mu      sync.Mutex
	watch   *http.Client // nil: leaders are not watched
	term    *Term
	leader  string // the leader's advertised URL, as observed
	lastErr error  // why the last campaign failed
	changed chan struct{}
}

// NewLeadership returns a campaigner for the replica whose API is at
// self. ttl is the session lease: a leader that dies without resigning
// (kill -9, lost network) is replaced once it expires. etcd rounds it up
// to whole seconds and to its own minimum (1.5 election timeouts: 2 s
// with etcd's defaults, 1 s with --election-timeout=500).
func NewLeadership(cli *clientv3.Client, self string, ttl time.Duration, log *slog.Logger, reg prometheus.Registerer) *Leadership {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	secs := max(1, int(math.Ceil(ttl.Seconds())))
	l := &Leadership{
		cli: cli, self: self, leaseTTL: secs, log: log, changed: make(chan struct{}), stepDown: make(chan string, 1),
		watchBackoff: time.Second,
		watchHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "accelnet_leader_watch_held",
			Help: "1 while this follower holds a request open to the leader's " + AlivePath + " (a leader whose process is gone is then replaced at once).",
		}),
		goneEnded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "accelnet_leader_gone_terms_ended_total",
			Help: "Terms of a leader whose process was gone (its API refused connections) that this replica ended by revoking their lease.",
		}),
		leading: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "accelnet_leader",
			Help: "1 while this replica leads (programs switches and decides admissions).",
		}),
		terms: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "accelnet_leader_terms_total",
			Help: "Terms this replica began as leader.",
		}),
		termID: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "accelnet_leader_election_id",
			Help: "The P4Runtime election_id of this replica's current term (0 while following).",
		}),
		leaseGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "accelnet_leader_lease_ttl_seconds",
			Help: "The TTL this replica's next (or current) election lease is granted with: --election-ttl, doubled after each lease that expired while it led, up to " + leaseTTLMax.String() + ".",
		}),
	}
	l.leaseGauge.Set(float64(secs))
	if reg != nil {
		reg.MustRegister(l.leading, l.terms, l.termID, l.watchHeld, l.goneEnded, l.leaseGauge)
	}
	return l
}

// SetSelf sets the URL this replica campaigns with; call it before Run.
func (l *Leadership) SetSelf(url string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.self = url
}

// Term returns the current term, nil while following.
func (l *Leadership) Term() *Term {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.term
}

// Changed is closed at the next change of term or of the observed leader.
func (l *Leadership) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// Leader returns the leader's advertised API URL ("" if unknown) and
// whether this replica is it.
func (l *Leadership) Leader() (url string, self bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.term != nil {
		return l.self, true
	}
	if l.leader == l.self {
		return "", false // our own term just ended; who leads next is not known yet
	}
	return l.leader, false
}

// NoLeaderReason says why this replica knows no leader now: its last
// campaign's error (etcd unreachable, …), or that a failover is under way.
func (l *Leadership) NoLeaderReason() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lastErr != nil {
		return fmt.Sprintf("this replica cannot take part in the leader election: %v", l.lastErr)
	}
	return "a failover is in progress"
}

// Holds reads the election key: see Leader.
func (l *Leadership) Holds(ctx context.Context, t *Term) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := l.cli.Get(ctx, t.Key)
	return err != nil || (len(resp.Kvs) == 1 && resp.Kvs[0].CreateRevision == t.Rev)
}

// StepDown ends the current term, if any.
func (l *Leadership) StepDown(reason string) {
	select {
	case l.stepDown <- reason:
	default: // one is pending already
	}
}

// setTerm records the start (t) or end (nil) of a term.
func (l *Leadership) setTerm(t *Term) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t == l.term {
		return
	}
	l.term = t
	if t != nil {
		l.leader = l.self
		l.leading.Set(1)
		l.termID.Set(float64(t.ID))
		l.terms.Inc()
	} else {
		l.leading.Set(0)
		l.termID.Set(0)
	}
	l.changedLocked()
}

// setLeader records the leader observed in etcd.
func (l *Leadership) setLeader(url string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if url != l.leader {
		l.leader = url
		l.changedLocked()
	}
}

func (l *Leadership) changedLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// Run campaigns until ctx ends. On the way out it resigns, so a follower
// takes over at once rather than after the lease expires.
func (l *Leadership) Run(ctx context.Context) error {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := l.campaign(ctx)
		if ctx.Err() != nil {
			break
		}
		l.mu.Lock()
		l.lastErr = err
		if errors.Is(err, errSteppedDown) {
			l.lastErr = nil
		}
		l.mu.Unlock()
		wait := backoff
		if errors.Is(err, errSteppedDown) {
			wait = time.Second // let a newer leader's switches settle first
		} else if errors.Is(err, errLeaseExpired) {
			// Not etcd unreachable: this replica led until its lease ran
			// out unrenewed (a starved machine). Campaign again at once,
			// with a lease that lasts longer.
			if next := leaseTTLFor(l.leaseTTL); next != l.leaseTTL {
				l.log.Warn("the election lease expired while leading; the next lasts longer", "lease_ttl_s", next, "was_s", l.leaseTTL)
				l.leaseTTL = next
				l.leaseGauge.Set(float64(next))
			}
			backoff = 100 * time.Millisecond
			wait = backoff
		} else if err != nil {
			l.log.Warn("leader election: retrying", "err", err, "retry_in", backoff)
			backoff = min(2*backoff, 5*time.Second)
		} else {
			backoff = 100 * time.Millisecond
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	l.setTerm(nil)
	return nil
}

var (
	errSteppedDown  = errors.New("stepped down")
	errLeaseExpired = errors.New("the leader's etcd session expired")
)

// leaseTTLMax bounds how long a lease grows (leaseTTLFor). A leader whose
// process is gone is replaced at once by the followers' watch
// (alive.go), whatever its lease; the lease bounds only how long a leader
// alive but cut off from etcd, or hung, keeps the fabric.
const leaseTTLMax = 30 * time.Second

// leaseTTLFor is the lease TTL (seconds) after one of cur seconds expired
// while its replica led. A lease that runs out unrenewed on a starved
// machine (the keepalive, the etcd server's lessor and the controller's
// own work share its cores) ends the term: a new term, a takeover of
// every switch, the elephants placed again. Twice as long each time, the
// lease soon outlasts the stalls; it is not shortened again while the
// process runs.
func leaseTTLFor(cur int) int {
	return max(cur, min(2*cur, int(leaseTTLMax/time.Second)))
}

// observeUntil follows who leads until ctx ends, for the API to forward
// to.
func (l *Leadership) observeUntil(ctx context.Context, e *concurrency.Election) {
	var w termWatch
	defer w.end()
	for ctx.Err() == nil {
		// Observe gives up when a read or its watch fails (an etcd member
		// restarting, a compaction): observe again.
		l.observe(ctx, e, &w)
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// lead holds the term e won until ctx ends, the session is lost for
// good, or the leader steps down; *sess is the session, renewed when
// the client gave up on a lease etcd still holds.
func (l *Leadership) lead(ctx context.Context, e *concurrency.Election, sess **concurrency.Session) (err error) {
	tctx, end := context.WithCancelCause(ctx)
	t := &Term{ID: uint64(e.Rev()), Key: e.Key(), Rev: e.Rev(), ctx: tctx, cancel: end}
	l.log.Info("leading", "election_id", t.ID, "lease_ttl_s", l.leaseTTL)
	l.setTerm(t)
	defer func() {
		end(errors.New("term over"))
		l.mu.Lock()
		if !errors.Is(err, errSteppedDown) {
			l.lastErr = err // before the term ends, so no one reads a stale reason
		}
		l.mu.Unlock()
		l.setTerm(nil)
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-(*sess).Done():
			// The client gave up on its keepalives (it stops when answers
			// are late, as on a starved CPU). If etcd still holds the
			// lease and our key, the term is intact: keep it alive again.
			if next := l.resume(ctx, (*sess).Lease(), t); next != nil {
				*sess = next
				continue
			}
			l.log.Warn("lost leadership: etcd session expired", "election_id", t.ID)
			return fmt.Errorf("%w: %w", store.ErrStoreUnavailable, errLeaseExpired)
		case reason := <-l.stepDown:
			l.log.Warn("stepping down", "election_id", t.ID, "reason", reason)
			return errSteppedDown
		}
	}
}

// A lease is granted through a raft proposal that etcd must fsync. On a
// machine whose disk or cores are starved by other work that can take
// longer than any fixed deadline: every attempt would time out and be
// asked again, and the fabric would have no leader for minutes. Each
// grant that runs out of time gives the next one twice as long, up to
// grantTimeoutMax; one that comes back starts over at grantTimeoutMin.
const (
	grantTimeoutMin = 5 * time.Second
	grantTimeoutMax = time.Minute
)

// nextGrantTimeout is how long the grant after one that waited cur and
// ended with err may take.
func nextGrantTimeout(cur time.Duration, err error) time.Duration {
	if errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded {
		return min(2*cur, grantTimeoutMax)
	}
	return grantTimeoutMin
}

// campaign runs one session: wait to lead, lead until the session or the
// term ends.
func (l *Leadership) campaign(ctx context.Context) (err error) {
	wait := max(l.grantTimeout, grantTimeoutMin)
	gctx, cancel := context.WithTimeout(ctx, wait)
	lease, err := l.cli.Grant(gctx, int64(l.leaseTTL))
	cancel()
	l.grantTimeout = nextGrantTimeout(wait, err)
	if err != nil {
		return fmt.Errorf("%w: grant the election lease (waited %s): %v", store.ErrStoreUnavailable, wait, err)
	}
	sess, err := concurrency.NewSession(l.cli, concurrency.WithLease(lease.ID), concurrency.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("%w: open an etcd session: %v", store.ErrStoreUnavailable, err)
	}
	defer func() {
		// Revoking the lease deletes our key: the next candidate leads now.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if _, err := l.cli.Revoke(cctx, sess.Lease()); err != nil {
			l.log.Debug("revoke election lease", "err", err)
		}
		sess.Orphan()
	}()
	e := concurrency.NewElection(sess, store.KeyElection)

	// Follow who leads while campaigning, for the API to forward to. The
	// watchers end with the campaign, waited for after it is stopped.
	var watchers sync.WaitGroup
	defer watchers.Wait()
	octx, stopObserving := context.WithCancel(ctx)
	defer stopObserving()
	watchers.Go(func() { l.observeUntil(octx, e) })

	cctx, stopCampaign := context.WithCancel(ctx)
	defer stopCampaign()
	watchers.Go(func() {
		select {
		case <-sess.Done(): // lease lost while waiting
			stopCampaign()
		case <-cctx.Done():
		}
	})
	// Drop step-downs asked for before this term.
	select {
	case <-l.stepDown:
	default:
	}
	l.mu.Lock()
	self := l.self
	l.mu.Unlock()
	if err := e.Campaign(cctx, self); err != nil {
		return fmt.Errorf("campaign: %w", err)
	}
	// Campaign returns once every older key is gone; make sure ours still
	// exists (the session may have expired meanwhile).
	resp, err := l.cli.Get(ctx, e.Key())
	if err != nil {
		return fmt.Errorf("check election key: %w", err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != e.Rev() {
		return errors.New("election key vanished while campaigning")
	}

	return l.lead(ctx, e, &sess)
}

// resume keeps a term's lease alive again after the client stopped
// renewing it, if etcd still has the lease and the term's key; nil if the
// term is over.
func (l *Leadership) resume(ctx context.Context, lease clientv3.LeaseID, t *Term) *concurrency.Session {
	// As long as the lease can have left: a starved machine answers late,
	// and a lease still held is a term still intact.
	cctx, cancel := context.WithTimeout(ctx, max(time.Second, time.Duration(l.leaseTTL)*time.Second))
	defer cancel()
	ttl, err := l.cli.TimeToLive(cctx, lease)
	if err != nil || ttl.TTL <= 0 {
		return nil
	}
	resp, err := l.cli.Get(cctx, t.Key)
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != t.Rev {
		return nil
	}
	sess, err := concurrency.NewSession(l.cli, concurrency.WithLease(lease), concurrency.WithContext(ctx))
	if err != nil {
		return nil
	}
	l.log.Info("leadership kept: renewing the lease again", "election_id", t.ID, "ttl_left_s", ttl.TTL)
	return sess
}
