package store

import (
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

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
	// etcd keeps the raft log since its last snapshot in memory, plus
	// the entries kept for a slow follower to catch up (10,000 and 5,000
	// by default). An admission batch is one entry of several intents (10
	// to 15 kB): with 100,000 intents stored that was 190 MiB of the
	// controller's heap. A snapshot every 2,500 entries, 1,000 kept for a
	// follower (one further behind gets the snapshot), hold about a
	// quarter of that.
	cfg.SnapshotCount, cfg.SnapshotCatchUpEntries = 2500, 1000
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
