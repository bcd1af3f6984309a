// Package embedded runs etcd inside accelnet's process (go.etcd.io/etcd/server/v3/embed):
// the one-member etcd of `accelnet demo` and of `serve` without
// --etcd-endpoints, protected by client certificates in its data
// directory, and the members of `accelnet etcd`. Only the binaries that
// run a server import it; the rest reach etcd through the store package.
package embedded

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.uber.org/zap"

	"github.com/accelnet/accelnet/internal/pki"
)

// MaxTxnOps is the embedded etcd's --max-txn-ops: admissions
// arriving together share one commit of up to this many operations.
const MaxTxnOps = 2048

// Server is an etcd server running inside this process.
type Server struct {
	etcd      *embed.Etcd
	Endpoints []string
	// Client is what a client presents and trusts to reach it (nothing
	// named: plaintext); ClientTLS the same as a TLS configuration.
	Client    pki.Files
	ClientTLS *tls.Config
	closeOnce sync.Once
	closing   *atomic.Bool // told to its logger (etcdlog.go)
}

// Start runs a single-member etcd in dir for this process: it
// listens on loopback ports chosen by the kernel (clientAddr, e.g.
// "127.0.0.1:2379", fixes the client port) and serves only clients that
// present a certificate of the CA kept in dir/pki (made on the first
// start; the directory is 0700, the keys 0600), so another local process
// cannot write to it, say to mint itself a token, without the rights to
// read the data directory. It returns once etcd serves.
func Start(dir, clientAddr string, log *slog.Logger) (*Server, error) {
	if clientAddr == "" {
		clientAddr = "127.0.0.1:0"
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("etcd data directory: %w", err)
	}
	ca, err := pki.LoadOrCreateCA(filepath.Join(dir, PKIDir), "accelnet embedded etcd")
	if err != nil {
		return nil, err
	}
	loopback := []string{"localhost", "127.0.0.1"}
	server, err := ca.Issue("server", loopback)
	if err != nil {
		return nil, err
	}
	client, err := ca.Issue("client", loopback)
	if err != nil {
		return nil, err
	}
	e, err := StartMember(Member{Dir: dir, ClientAddr: clientAddr, PeerAddr: "127.0.0.1:0",
		ClientTLS: server, PeerTLS: server, Client: client, Logger: log})
	if err != nil {
		return nil, err
	}
	// Where it listens, for a tool that holds the directory's
	// certificates (accelnet token create) while this process runs.
	if err := os.WriteFile(filepath.Join(dir, EndpointFile), []byte(e.Endpoints[0]+"\n"), 0o600); err != nil {
		e.Close()
		return nil, fmt.Errorf("etcd data directory: %w", err)
	}
	return e, nil
}

// EndpointFile is the file in its data directory where a running embedded
// etcd says its client address.
const EndpointFile = "client-endpoint"

// PKIDir is where in its data directory an embedded etcd keeps its
// CA and certificates (a process that holds the directory reaches it with
// them: ClientFiles).
const PKIDir = "pki"

// ClientFiles are the files a client presents to the embedded
// etcd whose data directory is dir.
func ClientFiles(dir string) pki.Files {
	d := filepath.Join(dir, PKIDir)
	return pki.Files{CA: filepath.Join(d, "ca.crt"), Cert: filepath.Join(d, "client.crt"), Key: filepath.Join(d, "client.key")}
}

// Member configures one member of an embedded etcd cluster.
type Member struct {
	Name       string // default "default"
	Dir        string
	ClientAddr string // host:port clients reach it at
	PeerAddr   string // host:port the other members reach it at
	// ListenClientAddr and ListenPeerAddr are where it listens, when not
	// at the advertised addresses (0.0.0.0:2379 in a container).
	ListenClientAddr, ListenPeerAddr string
	// InitialCluster is "name=http://peer,…" for every member (https://
	// with PeerTLS); empty for a single member.
	InitialCluster string
	// ClientTLS serves clients over TLS (Cert, Key), and with CA only
	// those presenting a certificate it signed; PeerTLS the same between
	// members (CA required: members verify each other). Nothing named:
	// plaintext.
	ClientTLS, PeerTLS pki.Files
	// Client is what this process's own clients present (Server.Client).
	Client pki.Files
	// MetricsAddr, if set, serves /health and /metrics over plain HTTP
	// there (a loopback address, for health checks).
	MetricsAddr string
	// Logger gets etcd's errors (nil: standard error, errors only); a
	// fatal error is logged before etcd ends the process.
	Logger *slog.Logger
}

// StartMember runs one etcd member. Members of a new cluster must
// start together: each returns once the cluster has a quorum.
func StartMember(m Member) (*Server, error) {
	cfg := embed.NewConfig()
	cfg.Dir = m.Dir
	if m.Name != "" {
		cfg.Name = m.Name
	}
	if m.PeerTLS.Enabled() && m.PeerTLS.CA == "" {
		return nil, errors.New("etcd peer TLS needs a CA to verify the other members (mutual TLS)")
	}
	clientScheme, peerScheme := scheme(m.ClientTLS), scheme(m.PeerTLS)
	cu, err := url.Parse(clientScheme + m.ClientAddr)
	if err != nil {
		return nil, fmt.Errorf("etcd client address %q: %w", m.ClientAddr, err)
	}
	pu, err := url.Parse(peerScheme + m.PeerAddr)
	if err != nil {
		return nil, fmt.Errorf("etcd peer address %q: %w", m.PeerAddr, err)
	}
	lcu, lpu := cu, pu
	if m.ListenClientAddr != "" {
		if lcu, err = url.Parse(clientScheme + m.ListenClientAddr); err != nil {
			return nil, fmt.Errorf("etcd client listen address %q: %w", m.ListenClientAddr, err)
		}
	}
	if m.ListenPeerAddr != "" {
		if lpu, err = url.Parse(peerScheme + m.ListenPeerAddr); err != nil {
			return nil, fmt.Errorf("etcd peer listen address %q: %w", m.ListenPeerAddr, err)
		}
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*lcu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*lpu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	if m.InitialCluster != "" {
		cfg.InitialCluster = m.InitialCluster
	}
	if m.ClientTLS.Enabled() {
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: m.ClientTLS.Cert, KeyFile: m.ClientTLS.Key,
			TrustedCAFile: m.ClientTLS.CA, ClientCertAuth: m.ClientTLS.CA != ""}
	}
	if m.PeerTLS.Enabled() {
		cfg.PeerTLSInfo = transport.TLSInfo{CertFile: m.PeerTLS.Cert, KeyFile: m.PeerTLS.Key,
			TrustedCAFile: m.PeerTLS.CA, ClientCertAuth: true}
	}
	if m.MetricsAddr != "" {
		mu, err := url.Parse("http://" + m.MetricsAddr)
		if err != nil {
			return nil, fmt.Errorf("etcd metrics address %q: %w", m.MetricsAddr, err)
		}
		cfg.ListenMetricsUrls = []url.URL{*mu}
	}
	log := m.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	}
	closing := new(atomic.Bool)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(slogCore{log: log.With("component", "etcd"), closing: closing}))
	cfg.MaxTxnOps = MaxTxnOps
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
	// to 15 kB): with 100,000 intents stored etcd's defaults hold 190 MiB
	// of the controller's heap. A snapshot every 2,500 entries, 1,000
	// kept for a follower (one further behind gets the snapshot), hold
	// about a quarter of that.
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
	out := &Server{etcd: e, Endpoints: []string{e.Clients[0].Addr().String()}, Client: m.Client, closing: closing}
	if m.ClientTLS.Enabled() {
		out.Client.CA = m.ClientTLS.CA
		if out.ClientTLS, err = out.Client.ClientConfig(); err != nil {
			e.Close()
			return nil, fmt.Errorf("embedded etcd client TLS: %w", err)
		}
	}
	return out, nil
}

func scheme(f pki.Files) string {
	if f.Enabled() {
		return "https://"
	}
	return "http://"
}

// Close stops the embedded etcd.
func (e *Server) Close() {
	e.closeOnce.Do(func() {
		e.closing.Store(true)
		e.etcd.Close()
	})
}

// InProcess is a client of this member that calls its server's
// functions directly: no socket, TLS or protobuf encoding between
// accelnet and the etcd in its own process (at 5,000 admissions a
// second that encoding, both ways, and the intents' watch were several
// percent of the process's CPU). Other processes (accelnet token, other
// replicas) reach the member at Endpoints. It does not carry gRPC
// metadata, so a watch's require-leader is not asked for; a one-member
// etcd leads itself once ready. Close it before the server.
func (e *Server) InProcess() *clientv3.Client { return v3client.New(e.etcd.Server) }

// IsLeader says whether this member leads its etcd cluster's raft group.
func (e *Server) IsLeader() bool { return e.etcd.Server.Leader() == e.etcd.Server.MemberID() }

// Dir is the data directory, to start it again on the same data.
func (e *Server) Dir() string { return e.etcd.Config().Dir }
