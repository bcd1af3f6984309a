// Package controller keeps accelnet's desired state in etcd and makes the
// switches match it: it watches the topology, computes routes with pathcalc,
// reconciles each switch (read back, diff, minimal batched write), and
// aggregates gNMI telemetry into per-link load.
//
// # Keys in etcd
//
// Everything lives under one versioned prefix, /accelnet/v1/:
//
//	/accelnet/v1/topology   JSON models.Topology: the whole fabric, replaced
//	                        atomically (one key, so a reader never sees half
//	                        a change; a k=16 fat-tree is about 400 KB, under
//	                        etcd's default 1.5 MiB request limit)
//	intents/<tenant>/<id>   JSON models.Intent, spec and status; its mod
//	                        revision is the API's ETag
//	idempotency/<tenant>/<sha256 of key>  which intent an Idempotency-Key made
//	tenants/<name>          JSON models.Tenant with its quotas
//	tokens/<sha256 of secret>  JSON models.Token (never the secret)
//	drains/<id>             JSON models.Drain
//	bootstrap               set once with the first operator token
//	leader/<lease ID hex>   a replica's candidacy, its API URL, bound to
//	                        its session lease (see Leadership)
//
// Keys and their JSON stay backward compatible once released: fields are
// only added.
package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/accelnet/accelnet/models"
)

// Prefix is the root of every accelnet key.
const Prefix = "/accelnet/v1/"

// KeyTopology holds the fabric's desired topology.
const KeyTopology = Prefix + "topology"

var (
	// ErrNoTopology means etcd has no topology yet.
	ErrNoTopology = errors.New("controller: no topology stored")
	// ErrConflict means a write lost a race with another writer (revision check).
	ErrConflict = errors.New("controller: concurrent update")
	// ErrStoreUnavailable means etcd could not be reached in time.
	ErrStoreUnavailable = errors.New("controller: etcd unavailable")
)

// Store is accelnet's view of etcd.
type Store struct {
	cli     *clientv3.Client
	timeout time.Duration
}

// NewStore wraps an etcd client. Each call is bounded by timeout (default 5s).
func NewStore(cli *clientv3.Client, timeout time.Duration) *Store {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return &Store{cli: cli, timeout: timeout}
}

// Client is the underlying etcd client.
func (s *Store) Client() *clientv3.Client { return s.cli }

func (s *Store) wrap(err error, what string) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, rpctypes.ErrNoLeader) ||
		status.Code(err) == codes.Unavailable || status.Code(err) == codes.DeadlineExceeded {
		return fmt.Errorf("%w: %s: %v", ErrStoreUnavailable, what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Topology returns the stored topology with the key's mod revision (for
// PutTopology's check) and the store revision it was read at (to watch from).
func (s *Store) Topology(ctx context.Context) (t models.Topology, modRevision, revision int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.cli.Get(ctx, KeyTopology)
	if err != nil {
		return t, 0, 0, s.wrap(err, "get topology")
	}
	if len(resp.Kvs) == 0 {
		return t, 0, resp.Header.Revision, ErrNoTopology
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, &t); err != nil {
		return t, 0, resp.Header.Revision, fmt.Errorf("decode stored topology: %w", err)
	}
	return t, resp.Kvs[0].ModRevision, resp.Header.Revision, nil
}

// PutTopology validates and stores a topology. If expectModRevision is not
// negative, the write only happens if the key's mod revision still equals it
// (0: the key must not exist); otherwise it returns ErrConflict.
func (s *Store) PutTopology(ctx context.Context, t models.Topology, expectModRevision int64) (int64, error) {
	if err := t.Validate(); err != nil {
		return 0, err
	}
	data, err := json.Marshal(t)
	if err != nil {
		return 0, fmt.Errorf("encode topology: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	txn := s.cli.Txn(ctx)
	if expectModRevision >= 0 {
		txn = txn.If(clientv3.Compare(clientv3.ModRevision(KeyTopology), "=", expectModRevision))
	}
	resp, err := txn.Then(clientv3.OpPut(KeyTopology, string(data))).Commit()
	if err != nil {
		return 0, s.wrap(err, "put topology")
	}
	if !resp.Succeeded {
		return 0, ErrConflict
	}
	return resp.Header.Revision, nil
}

// EmbeddedMaxTxnOps is the embedded etcd's --max-txn-ops: admissions
// arriving together share one commit of up to this many operations.
const EmbeddedMaxTxnOps = 2048

// Embedded is an etcd server running inside this process.
type Embedded struct {
	etcd      *embed.Etcd
	Endpoints []string
	closeOnce sync.Once
}

// StartEmbedded runs a single-member etcd in dir, listening on loopback
// ports chosen by the kernel (clientAddr, e.g. "127.0.0.1:2379", fixes the
// client port). It returns once etcd serves.
func StartEmbedded(dir, clientAddr string) (*Embedded, error) {
	if clientAddr == "" {
		clientAddr = "127.0.0.1:0"
	}
	return StartEmbeddedMember(EmbeddedMember{Dir: dir, ClientAddr: clientAddr, PeerAddr: "127.0.0.1:0"})
}

// EmbeddedMember configures one member of an embedded etcd cluster.
type EmbeddedMember struct {
	Name       string // default "default"
	Dir        string
	ClientAddr string // host:port clients reach it at
	PeerAddr   string // host:port the other members reach it at
	// ListenClientAddr and ListenPeerAddr are where it listens, when not
	// at the advertised addresses (0.0.0.0:2379 in a container).
	ListenClientAddr, ListenPeerAddr string
	// InitialCluster is "name=http://peer,…" for every member; empty for
	// a single member.
	InitialCluster string
}

// StartEmbeddedMember runs one etcd member. Members of a new cluster must
// start together: each returns once the cluster has a quorum.
func StartEmbeddedMember(m EmbeddedMember) (*Embedded, error) {
	cfg := embed.NewConfig()
	cfg.Dir = m.Dir
	if m.Name != "" {
		cfg.Name = m.Name
	}
	cu, err := url.Parse("http://" + m.ClientAddr)
	if err != nil {
		return nil, fmt.Errorf("etcd client address %q: %w", m.ClientAddr, err)
	}
	pu, err := url.Parse("http://" + m.PeerAddr)
	if err != nil {
		return nil, fmt.Errorf("etcd peer address %q: %w", m.PeerAddr, err)
	}
	lcu, lpu := cu, pu
	if m.ListenClientAddr != "" {
		if lcu, err = url.Parse("http://" + m.ListenClientAddr); err != nil {
			return nil, fmt.Errorf("etcd client listen address %q: %w", m.ListenClientAddr, err)
		}
	}
	if m.ListenPeerAddr != "" {
		if lpu, err = url.Parse("http://" + m.ListenPeerAddr); err != nil {
			return nil, fmt.Errorf("etcd peer listen address %q: %w", m.ListenPeerAddr, err)
		}
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*lcu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*lpu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	if m.InitialCluster != "" {
		cfg.InitialCluster = m.InitialCluster
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.MaxTxnOps = EmbeddedMaxTxnOps
	// A 500 ms election timeout makes etcd's minimum lease 1 s (1.5
	// election timeouts, rounded up), so a dead leader's lease can expire
	// in a second; etcd's default of 1000 ms would make it 2 s.
	cfg.TickMs, cfg.ElectionMs = 100, 500
	// Every intent status change is a new revision of its key: keep an
	// hour of history (watchers that fall further behind re-list).
	cfg.AutoCompactionMode, cfg.AutoCompactionRetention = "periodic", "1h"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, errors.New("embedded etcd did not become ready in 60s")
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	return &Embedded{etcd: e, Endpoints: []string{e.Clients[0].Addr().String()}}, nil
}

// Close stops the embedded etcd.
func (e *Embedded) Close() { e.closeOnce.Do(e.etcd.Close) }

// IsLeader says whether this member leads its etcd cluster's raft group.
func (e *Embedded) IsLeader() bool { return e.etcd.Server.Leader() == e.etcd.Server.MemberID() }

// Dir is the data directory, to start it again on the same data.
func (e *Embedded) Dir() string { return e.etcd.Config().Dir }

// Dial connects an etcd client to endpoints.
func Dial(endpoints []string) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("connect to etcd %v: %w", endpoints, err)
	}
	return cli, nil
}

// kv is one key's value (or deletion) from a list or a watch.
type kv struct {
	key      string
	value    []byte
	revision int64
	deleted  bool
}

// follow lists prefix and calls fn with everything (reset true), then
// watches from the next revision and calls fn with each change, re-listing
// after compaction or a broken watch, until ctx ends.
func (s *Store) follow(ctx context.Context, prefix string, fn func(kvs []kv, reset bool)) error {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		lctx, cancel := context.WithTimeout(ctx, s.timeout)
		resp, err := s.cli.Get(lctx, prefix, clientv3.WithPrefix())
		cancel()
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		all := make([]kv, len(resp.Kvs))
		for i, e := range resp.Kvs {
			all[i] = kv{key: string(e.Key), value: e.Value, revision: e.ModRevision}
		}
		fn(all, true)
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for w := range s.cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)) {
			if w.Err() != nil {
				break
			}
			changes := make([]kv, len(w.Events))
			for i, ev := range w.Events {
				changes[i] = kv{key: string(ev.Kv.Key), value: ev.Kv.Value, revision: ev.Kv.ModRevision, deleted: ev.Type == clientv3.EventTypeDelete}
			}
			fn(changes, false)
		}
		wcancel()
	}
	return nil
}

// getJSON reads key into v; found is false when the key does not exist.
func (s *Store) getJSON(ctx context.Context, key string, v any) (found bool, modRevision int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return false, 0, s.wrap(err, "get "+key)
	}
	if len(resp.Kvs) == 0 {
		return false, 0, nil
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, v); err != nil {
		return false, 0, fmt.Errorf("decode %s: %w", key, err)
	}
	return true, resp.Kvs[0].ModRevision, nil
}

func (s *Store) putJSON(ctx context.Context, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.txn(ctx, nil, []clientv3.Op{clientv3.OpPut(key, string(data))})
}

// txn commits ops if every comparison holds, else returns ErrConflict.
func (s *Store) txn(ctx context.Context, cmps []clientv3.Cmp, ops []clientv3.Op) error {
	_, err := s.commit(ctx, cmps, ops)
	return err
}

// commit is txn returning the revision committed at.
func (s *Store) commit(ctx context.Context, cmps []clientv3.Cmp, ops []clientv3.Op) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return 0, s.wrap(err, "etcd transaction")
	}
	if !resp.Succeeded {
		return 0, ErrConflict
	}
	return resp.Header.Revision, nil
}

func (s *Store) deletePrefix(ctx context.Context, prefix string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.cli.Delete(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, s.wrap(err, "delete "+prefix)
	}
	return resp.Deleted, nil
}

// followJSON keeps *m (key after prefix → decoded value) in step with
// etcd under mu, calling changed (if set) after every update; values that
// do not decode are dropped.
func followJSON[K ~string, V any](ctx context.Context, s *Store, prefix string, mu sync.Locker, m *map[K]V, changed func()) error {
	return s.follow(ctx, prefix, func(kvs []kv, reset bool) {
		mu.Lock()
		if reset {
			*m = map[K]V{}
		}
		for _, e := range kvs {
			k := K(strings.TrimPrefix(e.key, prefix))
			var v V
			if e.deleted || json.Unmarshal(e.value, &v) != nil {
				delete(*m, k)
			} else {
				(*m)[k] = v
			}
		}
		mu.Unlock()
		if changed != nil {
			changed()
		}
	})
}
