// Command accelnet is the accelnet SDN controller.
//
//	accelnet demo    everything in one process: embedded etcd, an emulated
//	                 fabric with a workload, the controller, REST on :8080
//	accelnet serve   the controller for real switches listed in a topology file
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"

	"github.com/accelnet/accelnet/controller"
	"github.com/accelnet/accelnet/fabricsim"
	"github.com/accelnet/accelnet/intents"
	"github.com/accelnet/accelnet/internal/httpserve"
	"github.com/accelnet/accelnet/internal/pki"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/northbound"
	"github.com/accelnet/accelnet/topology"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// Config is everything accelnet's commands take.
type Config struct {
	// stack.Config is what the flags of the running system set; the
	// fields below are the command line's own.
	stack.Config

	HTTPAddr string
	DataDir  string
	// Fresh removes an earlier run's state from DataDir first (demo);
	// Keep keeps state made for another fabric (demo refuses it otherwise).
	Fresh, Keep bool
	// TopologySpec is a topology file or a generated fabric
	// (leafspine:…, fattree:…), loaded into stack.Config.Topology.
	TopologySpec string
	LogLevel     string

	// TLS: the API over HTTPS (with TLSClientCA, mutual TLS); TLSCA
	// verifies other replicas when forwarding to the leader. The switches'
	// TLS is stack.Config.SouthboundTLS.
	TLSCert, TLSKey, TLSClientCA, TLSCA string
	// TLSServerName is the name a follower checks in the leader's
	// certificate (default: the host of the leader's advertised URL).
	TLSServerName string
	// ForeignEntries is what to do with entries of accelnet's tables the
	// controller did not write: remove or keep.
	ForeignEntries string
	// MemoryLimit is the Go runtime's soft memory limit: auto, none or a
	// size (memlimit.go).
	MemoryLimit string
	// OperatorTokenFile holds the first operator token's secret, to
	// register on the first start (a mounted Secret); empty: one is made
	// and written to the data directory.
	OperatorTokenFile string
	// MaxConnections bounds the API listener's connections (0: what the
	// open-file limit leaves, fdlimit.go), MaxConnectionsPerSource those
	// of one client address.
	MaxConnections, MaxConnectionsPerSource int

	// flagSet says whether a flag was given (the command line, the
	// environment, the config file); nil: none was.
	flagSet func(name string) bool

	// demo only
	Workload string
	// DeclareIntents declares the workload's flows as intents once it runs.
	DeclareIntents bool
	Gbps           float64
	QPs            int
	Seed           uint64
}

// Where the API listens unless --http-addr says otherwise: the demo on
// loopback only, serve (a deployment) on every interface.
const (
	demoHTTPAddr  = "127.0.0.1:8080"
	serveHTTPAddr = ":8080"
)

// defaultHTTPAddr sets the API's address for demo or serve unless the
// command line, the environment or the config file gave one. The demo's
// fabric can be faulted and its flows read through /sim/v1: it is not for
// the network unless asked.
func (c *Config) defaultHTTPAddr(flags *pflag.FlagSet, demo bool) {
	if flags.Changed("http-addr") {
		return
	}
	c.HTTPAddr = serveHTTPAddr
	if demo {
		c.HTTPAddr = demoHTTPAddr
	}
}

func defaultConfig() Config {
	return Config{
		Config: stack.Config{
			ElectionTTL: stack.DefaultElectionTTL,
			Intents: intents.Policy{
				Headroom:       0.05,
				PendingTimeout: intents.DefaultPendingTimeout,
				TenantPinShare: intents.DefaultTenantPinShare,
				KeepFinished:   intents.DefaultKeepFinished,
				MaxFinished:    intents.DefaultMaxFinished,
			},
			APIRateLimit:       northbound.DefaultRateLimit,
			TelemetryInterval:  controller.DefaultTelemetryInterval,
			Workers:            controller.DefaultWorkers,
			CongestionInterval: 5 * time.Second,
			DiscoveryInterval:  stack.DefaultDiscoveryInterval,
			LivenessInterval:   controller.DefaultLivenessInterval,
			ProbeRate:          controller.DefaultProbeRate,
			Elephants: stack.Elephants{
				ObserveInterval: stack.DefaultObserveInterval,
				SampleOneIn:     DefaultSampleOneIn,
				Gbps:            stack.DefaultElephantGbps,
			},
			FlapHalfLife: controller.DefaultFlapHalfLife,
			MTU:          controller.DefaultMTU,
		},
		DataDir:        "accelnet-data",
		ForeignEntries: "remove",
		MemoryLimit:    "auto",
		LogLevel:       "info",
		TopologySpec:   "leafspine:8x8x4",
		Workload:       "permutation",
		Gbps:           400,
		QPs:            1,
		Seed:           1,

		MaxConnectionsPerSource: defaultConnsPerSource,
	}
}

// stackConfig is the stack's config for this command line: the flags'
// fields as they are, with what the command line says its own way (demo:
// emulate the fabric; which foreign entries to keep).
func (c Config) stackConfig(demo bool, log *slog.Logger) stack.Config {
	sc := c.Config
	sc.Emulate = demo
	sc.KeepForeignEntries = c.ForeignEntries == "keep"
	sc.Logger = log
	return sc
}

// Validate checks the config before anything starts.
func (c Config) Validate(demo bool) error {
	if c.HTTPAddr == "" {
		return errors.New("--http-addr is empty")
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		return fmt.Errorf("--http-addr %q: %v", c.HTTPAddr, err)
	}
	if len(c.Etcd.Endpoints) == 0 && c.DataDir == "" {
		return errors.New("--data-dir is required for embedded etcd (or give --etcd-endpoints)")
	}
	if c.ElectionTTL < time.Second {
		return fmt.Errorf("--election-ttl %v: etcd leases last whole seconds; at least 1s", c.ElectionTTL)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	if !(c.Intents.TenantPinShare > 0 && c.Intents.TenantPinShare <= 1) {
		return fmt.Errorf("--tenant-pin-share %v: want a fraction in (0, 1]", c.Intents.TenantPinShare)
	}
	if c.Intents.Headroom < 0 || c.Intents.Headroom >= 1 {
		return fmt.Errorf("--headroom %v: want a fraction in [0, 1)", c.Intents.Headroom)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	if c.TLSClientCA != "" && c.TLSCert == "" {
		return errors.New("--tls-client-ca needs --tls-cert and --tls-key (mutual TLS is on top of HTTPS)")
	}
	if (c.Etcd.TLS.Cert == "") != (c.Etcd.TLS.Key == "") {
		return errors.New("--etcd-cert and --etcd-key go together")
	}
	if c.Etcd.TLS.Enabled() && len(c.Etcd.Endpoints) == 0 {
		return errors.New("--etcd-ca, --etcd-cert and --etcd-key are for --etcd-endpoints (the embedded etcd makes its own certificates in --data-dir)")
	}
	if (c.SouthboundTLS.Cert == "") != (c.SouthboundTLS.Key == "") {
		return errors.New("--southbound-tls-cert and --southbound-tls-key go together")
	}
	if c.ForeignEntries != "remove" && c.ForeignEntries != "keep" {
		return fmt.Errorf("--foreign-entries %q: want remove or keep", c.ForeignEntries)
	}
	if c.MaxConnections < 0 || c.MaxConnectionsPerSource < 1 {
		return fmt.Errorf("--max-connections %d, --max-connections-per-source %d: want 0 (auto) or more, and 1 or more", c.MaxConnections, c.MaxConnectionsPerSource)
	}
	if err := checkMemoryLimit(c.MemoryLimit); err != nil {
		return err
	}
	if c.MTU < 68 {
		return fmt.Errorf("--mtu %d: below the IPv4 minimum of 68", c.MTU)
	}
	if c.Elephants.Gbps <= 0 || math.IsNaN(c.Elephants.Gbps) {
		return fmt.Errorf("--elephant-gbps %v: want a positive rate", c.Elephants.Gbps)
	}
	if c.ProbeRate < 0 {
		return fmt.Errorf("--probe-rate %d: want 0 (off) or a positive number of probes a second", c.ProbeRate)
	}
	if c.LivenessInterval < 0 {
		return fmt.Errorf("--liveness-interval %v: want 0 (off) or a positive interval", c.LivenessInterval)
	}
	if c.DiscoveryInterval < 0 {
		return fmt.Errorf("--discovery-interval %v: want 0 (off) or a positive interval", c.DiscoveryInterval)
	}
	if c.CongestionInterval < 0 {
		return fmt.Errorf("--congestion-interval %v: want 0 (off) or a positive interval", c.CongestionInterval)
	}
	if c.Intents.PendingTimeout <= 0 {
		return fmt.Errorf("--pending-timeout %v: must be positive", c.Intents.PendingTimeout)
	}
	if c.Intents.KeepFinished <= 0 || c.Intents.MaxFinished <= 0 {
		return fmt.Errorf("--keep-finished %v, --max-finished %d: both must be positive", c.Intents.KeepFinished, c.Intents.MaxFinished)
	}
	if demo {
		switch c.Workload {
		case "none", fabricsim.PatternPermutation, fabricsim.PatternStride, fabricsim.PatternRing,
			fabricsim.PatternAllToAll, fabricsim.PatternIncast, fabricsim.PatternMultiTenant:
		default:
			return fmt.Errorf("--workload %q: want none, permutation, stride, ring-allreduce, all-to-all, incast or multi-tenant", c.Workload)
		}
		if !(c.Gbps > 0) {
			return errors.New("--gbps must be positive")
		}
		if c.QPs < 1 {
			return errors.New("--qps must be at least 1")
		}
	} else if c.TopologySpec == "" && len(c.Etcd.Endpoints) == 0 {
		return errors.New("--topology is required: a topology file naming your switches and their addresses")
	} else if topology.IsSpec(c.TopologySpec) {
		// A generated fabric has no switch addresses: serve would warn
		// about every switch forever.
		return fmt.Errorf("--topology %s: serve programs real switches, and a generated fabric has no addresses for them. Give a topology file, or emulate this fabric and use the file it writes: fabricsim -topology %s -out fabric.yaml, then accelnet serve --topology fabric.yaml (accelnet demo runs both in one process)", c.TopologySpec, c.TopologySpec)
	}
	return nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, fmt.Errorf("--log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

func main() {
	if err := newRootCommand().Execute(); err != nil {
		os.Exit(1)
	}
}

// configHelp says where flag values can come from; every command shows it.
const configHelp = `Every flag can also come from the environment, as ACCELNET_ and the flag's
name in capitals with dashes as underscores (ACCELNET_ETCD_ENDPOINTS=a:2379,b:2379),
or from a YAML file given with --config whose keys are flag names
(etcd-endpoints: [a:2379, b:2379]). The command line wins over the
environment, which wins over the file.`

// bindFlags binds the flags every command shares to cfg.
func bindFlags(f *pflag.FlagSet, cfg *Config) {
	f.StringVar(&cfg.HTTPAddr, "http-addr", "", "address of the REST API, dashboard and /metrics (default: demo 127.0.0.1:8080, loopback only; serve :8080, every interface)")
	f.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory for embedded etcd's data and library logs")
	f.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "debug, info, warn or error")
	f.DurationVar(&cfg.ElectionTTL, "election-ttl", cfg.ElectionTTL, "leader lease: a leader that dies without resigning is replaced once it expires (etcd raises it to 1.5 of its election timeouts: 2s with etcd's defaults; 1s needs etcd's --election-timeout at most 500ms and a host that renews it in time)")
	f.StringVar(&cfg.AdvertiseURL, "advertise-url", "", "this replica's API URL as the other replicas reach it (followers forward writes to the leader there); default http://<hostname>:<port of --http-addr>")
	f.Float64Var(&cfg.Intents.Headroom, "headroom", cfg.Intents.Headroom, "fraction of every link that intents may not reserve")
	f.BoolVar(&cfg.Intents.Preemption, "preemption", cfg.Intents.Preemption, "let higher-priority intents displace lower-priority ones (displaced intents wait in Pending)")
	f.Float64Var(&cfg.Intents.TenantPinShare, "tenant-pin-share", cfg.Intents.TenantPinShare, "share of any switch's flow-pin table one tenant's intents may hold, unless the operator sets the tenant's max_pins_per_switch (so one tenant cannot fill a leaf's table for everyone)")
	f.DurationVar(&cfg.Intents.PendingTimeout, "pending-timeout", cfg.Intents.PendingTimeout, "how long an intent may wait in Pending before it is Failed")
	f.DurationVar(&cfg.Intents.KeepFinished, "keep-finished", cfg.Intents.KeepFinished, "how long a Rejected or Failed intent's record is kept")
	f.IntVar(&cfg.Intents.MaxFinished, "max-finished", cfg.Intents.MaxFinished, "how many Rejected or Failed intents' records a tenant keeps at most (the oldest go first)")
	f.Uint16Var(&cfg.MTU, "mtu", cfg.MTU, "interface MTU of the fabric profile, pushed to every port over gNMI (4200 fits a 4096-byte RoCE payload)")
	f.DurationVar(&cfg.FlapHalfLife, "flap-half-life", cfg.FlapHalfLife, "flap dampening: how fast a link's failure penalty halves (two failures close together keep it out of routes for about 1.5 half-lives)")
	f.DurationVar(&cfg.DiscoveryInterval, "discovery-interval", cfg.DiscoveryInterval, "how often link discovery sends an LLDP probe out of every fabric port (packet-out) and checks the declared links (a miswired or lost link carries no routes); 0 turns it off")
	f.DurationVar(&cfg.LivenessInterval, "liveness-interval", cfg.LivenessInterval, "how often a probe crosses each fabric link that ends on a switch reporting no oper-status (no gnmi_addr, such as BMv2): a cut link is lost 3 to 4 intervals after; 0 turns it off")
	f.IntVar(&cfg.ProbeRate, "probe-rate", cfg.ProbeRate, "latency probes a second the leader sends between leaves (the pingmesh: each a packet-out at one leaf, punted back by another, recording every hop's queue): /api/v1/latency's probes; 0 turns it off")
	f.DurationVar(&cfg.CongestionInterval, "congestion-interval", cfg.CongestionInterval, "how often measured link load shifts WCMP weight away from links at 90% or more (and back below 60%); 0 turns it off")
	f.Uint32Var(&cfg.Elephants.SampleOneIn, "sample-one-in", cfg.Elephants.SampleOneIn, "leaves sample 1 in this many RoCEv2 packets their hosts send and report them (P4Runtime digests), to find elephant flows nobody declared; 0 turns sampling off")
	f.Float64Var(&cfg.Elephants.Gbps, "elephant-gbps", cfg.Elephants.Gbps, "a sampled flow estimated at this rate or more is an elephant: pinned on a path chosen with the others instead of hashed")
	f.DurationVar(&cfg.TelemetryInterval, "telemetry-interval", cfg.TelemetryInterval, "gNMI sample interval of the switches' interface counters (link load, congestion weights, drains); a fabric of thousands of switches wants 5-10s")
	f.DurationVar(&cfg.Latency.SwitchDelay, "switch-delay", 800*time.Nanosecond, "latency figures (/api/v1/latency): what a switch takes to forward a packet, besides its queue (its datasheet's port-to-port latency)")
	f.DurationVar(&cfg.Latency.LinkDelay, "link-delay", 500*time.Nanosecond, "latency figures: a link's propagation delay (5 ns a metre of fibre)")
	f.BoolVar(&cfg.PerLeafRoutes, "per-leaf-routes", cfg.PerLeafRoutes, "write one route per destination leaf instead of merging sibling prefixes that go the same way (a pod in an aligned block takes one entry per switch outside it)")
	f.IntVar(&cfg.Workers, "workers", cfg.Workers, "switches reconciled at once, per kind of work (tables, interface config, sampling)")
	f.IntVar(&cfg.SweepWorkers, "sweep-workers", cfg.SweepWorkers, "switches' tables reconciled at once while a new leader reads every switch back (each a different switch); 0: 16; never fewer than --workers")
	f.BoolVar(&cfg.LeaseOnlyFailover, "lease-only-failover", cfg.LeaseOnlyFailover, "replace a leader that died without resigning only when its lease (--election-ttl) expires; by default a follower holds a request open to the leader's API (/leaderz) and, when it ends and the leader's address refuses connections (its process is gone), revokes the leader's lease at once")
	f.BoolVar(&cfg.TakeoverReadAll, "takeover-read-all", cfg.TakeoverReadAll, "a new leader reads every switch back in full; by default it probes a switch the previous leader left as recorded (its handover mark in etcd) instead of reading its routes and flow pins, and the leader keeps those marks")
	f.DurationVar(&cfg.Elephants.ObserveInterval, "observe-interval", cfg.Elephants.ObserveInterval, "how often installed intents' flow counters are read for their observed rate")
	f.Float64Var(&cfg.APIRateLimit, "api-rate-limit", cfg.APIRateLimit, "REST requests per second per token (bursts of twice that); negative: unlimited")
	f.StringVar(&cfg.TLSCert, "tls-cert", "", "PEM certificate: serve the API, dashboard and /metrics over HTTPS (with --tls-key)")
	f.StringVar(&cfg.TLSKey, "tls-key", "", "PEM key of --tls-cert")
	f.StringVar(&cfg.TLSClientCA, "tls-client-ca", "", "PEM CA bundle: require API clients (and forwarding replicas) to present a certificate it signed (mutual TLS); /healthz and /readyz stay open for probes")
	f.StringVar(&cfg.TLSCA, "tls-ca", "", "PEM CA bundle that verifies the leader's HTTPS certificate when a follower forwards to it (default: the system's roots); with --tls-client-ca the follower presents --tls-cert")
	f.StringVar(&cfg.TLSServerName, "tls-server-name", "", "name a follower checks in the leader's HTTPS certificate (default: the host of the leader's --advertise-url; set it when replicas advertise pod IPs and share one certificate)")
	f.StringVar(&cfg.SouthboundTLS.CA, "southbound-tls-ca", "", "PEM CA bundle that verifies the switches' P4Runtime/gNMI certificates; setting any southbound-tls flag turns TLS on")
	f.StringVar(&cfg.SouthboundTLS.Cert, "southbound-tls-cert", "", "PEM client certificate presented to the switches (mutual TLS)")
	f.StringVar(&cfg.SouthboundTLS.Key, "southbound-tls-key", "", "PEM key of --southbound-tls-cert")
	f.StringVar(&cfg.SouthboundTLS.ServerName, "southbound-tls-server-name", "", "name to verify in every switch's certificate (default: the host it is dialled at)")
	f.StringVar(&cfg.ForeignEntries, "foreign-entries", cfg.ForeignEntries, "entries in accelnet's tables the controller did not write (no accelnet tag in their metadata): remove (as drift) or keep (left alone; one it needs under the same key is taken over)")
	f.StringVar(&cfg.MemoryLimit, "memory-limit", cfg.MemoryLimit, "soft memory limit of the Go runtime: the collector runs more often near it instead of letting the heap grow to twice what is live. auto: GOMEMLIMIT if set, else 90% of the container's memory limit (cgroup), else none; none; or a size such as 1800MiB")
	f.IntVar(&cfg.MaxConnections, "max-connections", cfg.MaxConnections, "connections the API holds at once; past it an idle connection that showed no valid token is closed for the new one, or the new one is refused. 0: what the open-file limit leaves after etcd and the switches (at most 16384)")
	f.IntVar(&cfg.MaxConnectionsPerSource, "max-connections-per-source", cfg.MaxConnectionsPerSource, "connections one client address holds at once (the same rule past it, among that address's connections)")
	f.StringVar(&cfg.OperatorTokenFile, "operator-token-file", "", "file holding the first operator token's secret (a mounted Secret: accelnet certs --kubernetes makes one), registered on the cluster's first start and written nowhere; default: one is made, printed once and written to --data-dir/operator.token")
}

// newDemoCommand is "accelnet demo".
func newDemoCommand(cfg *Config) *cobra.Command {
	demo := &cobra.Command{
		Use:   "demo",
		Short: "Run embedded etcd, an emulated fabric with a workload, the controller and the API in one process",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.defaultHTTPAddr(cmd.Flags(), true)
			cfg.flagSet = cmd.Flags().Changed
			if cfg.DeclareIntents && !cmd.Flags().Changed("sample-one-in") {
				// Sampling would pin the flows within a second of their
				// start: the "before" figure would not be hashing's.
				cfg.Elephants.SampleOneIn = 0
			}
			return run(cmd.Context(), *cfg, true)
		},
	}
	demo.Flags().StringVar(&cfg.TopologySpec, "topology", cfg.TopologySpec, "fabric to emulate: a topology file, leafspine:LEAVESxHOSTSxSPINES or fattree:K")
	demo.Flags().StringVar(&cfg.Workload, "workload", cfg.Workload, "background traffic: permutation, stride, ring-allreduce, all-to-all, incast, multi-tenant or none")
	demo.Flags().Float64Var(&cfg.Gbps, "gbps", cfg.Gbps, "link and NIC speed for generated fabrics, and each host's offered load")
	demo.Flags().IntVar(&cfg.QPs, "qps", cfg.QPs, "queue pairs (UDP source ports) per host pair in the workload")
	demo.Flags().Uint64Var(&cfg.Seed, "seed", cfg.Seed, "workload random seed")
	demo.Flags().BoolVar(&cfg.Keep, "keep", false, "keep what --data-dir holds when it was made for another fabric (its intents over hosts this one lacks fail; its drains apply to switches and links of the same names); without it the demo refuses to start on it")
	demo.Flags().BoolVar(&cfg.Fresh, "fresh", false, "start clean: remove what an earlier run left in --data-dir (tenants, tokens, intents, drains, the operator token) first")
	demo.Flags().BoolVar(&cfg.DeclareIntents, "intents", cfg.DeclareIntents, "after the workload starts on ECMP, declare its flows as intents (tenant \"jobs\") and log the throughput before and after (turns sampling off unless --sample-one-in is given)")
	return demo
}

// newServeCommand is "accelnet serve".
func newServeCommand(cfg *Config) *cobra.Command {
	// serve has no default fabric; its own variable keeps demo's default intact.
	var serveTopology string
	serve := &cobra.Command{
		Use:   "serve",
		Short: "Run the controller for the switches of a topology file",
		Long: `Run the controller for the switches of a topology file. Several replicas on
one etcd cluster elect a leader (--election-ttl): it programs the switches;
the others serve reads and forward writes to it (--advertise-url). TLS:
--tls-* for the API, --southbound-tls-* for P4Runtime and gNMI.

` + configHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.TopologySpec = serveTopology
			cfg.defaultHTTPAddr(cmd.Flags(), false)
			return run(cmd.Context(), *cfg, false)
		},
	}
	serve.Flags().StringVar(&serveTopology, "topology", "", "topology file to store in etcd (optional with --etcd-endpoints: use the stored one)")
	serve.Flags().StringSliceVar(&cfg.Etcd.Endpoints, "etcd-endpoints", nil, "etcd cluster to join (host:port,…); empty runs an embedded etcd in --data-dir")
	serve.Flags().StringVar(&cfg.Etcd.TLS.CA, "etcd-ca", "", "PEM CA bundle that verifies the etcd cluster's certificates (https endpoints); setting any etcd TLS flag turns TLS on")
	serve.Flags().StringVar(&cfg.Etcd.TLS.Cert, "etcd-cert", "", "PEM client certificate presented to etcd (its --client-cert-auth)")
	serve.Flags().StringVar(&cfg.Etcd.TLS.Key, "etcd-key", "", "PEM key of --etcd-cert")
	serve.Flags().IntVar(&cfg.Etcd.MaxTxnOps, "etcd-max-txn-ops", 0, "the cluster's --max-txn-ops (default 128 for a cluster; admissions arriving together share one transaction up to it)")
	return serve
}

func newRootCommand() *cobra.Command {
	cfg := defaultConfig()
	var configFile string
	root := &cobra.Command{
		Use:           "accelnet",
		Short:         "SDN controller for RDMA accelerator fabrics",
		Long:          "accelnet: SDN controller for RDMA accelerator fabrics.\n\n" + configHelp,
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	bindFlags(root.PersistentFlags(), &cfg)
	root.PersistentFlags().StringVar(&configFile, "config", "", "YAML file of flag values (keys are flag names: http-addr: \":8080\", etcd-endpoints: [a:2379, b:2379]); flags given on the command line and ACCELNET_* environment variables win over it")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		return applyConfig(cmd.Flags(), configFile, os.LookupEnv)
	}

	demo, serve := newDemoCommand(&cfg), newServeCommand(&cfg)
	ver := &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), "accelnet", version) },
	}
	root.AddCommand(demo, serve, ver, newEvalCommand(), newEtcdCommand(), newProbeCommand(), newTokenCommand(&cfg.DataDir), newCertsCommand())
	return root
}

func run(parent context.Context, cfg Config, demo bool) error {
	if err := cfg.Validate(demo); err != nil {
		return err
	}
	level, _ := parseLevel(cfg.LogLevel)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	started := time.Now()
	limit, err := applyMemoryLimit(cfg.MemoryLimit)
	if err != nil {
		return err
	}
	log.Info("memory limit", "limit", limit)
	filesBefore, files, err := raiseFileLimit()
	if err != nil {
		log.Warn("open-file limit", "err", err)
	}

	// What can fail at once, before anything starts: the listen address
	// and the data directory (etcd would wait on it forever).
	lis, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (is another accelnet running? --http-addr picks another address)", cfg.HTTPAddr, err)
	}
	defer lis.Close()
	release, err := prepareDataDir(cfg)
	if err != nil {
		return err
	}
	defer release()
	opts, where, err := cfg.runConfig(demo, log)
	if err != nil {
		return err
	}
	serverTLS, forward, err := apiTLS(cfg)
	if err != nil {
		return err
	}
	opts.ForwardTransport = forward
	s, err := stack.New(ctx, opts)
	if err != nil {
		return err
	}
	defer s.Close()
	greet(ctx, s, cfg, opts.OperatorTokenFile, where, demo, log)

	handler := s.Handler
	if cfg.TLSClientCA != "" {
		handler = northbound.RequireClientCert(handler)
	}
	srv := httpserve.NewServer(handler, serverTLS)
	switches := 0
	if opts.Topology != nil {
		switches = len(opts.Topology.Switches)
	} else if t, _, _, err := s.Store.Topology(ctx); err == nil {
		switches = len(t.Switches)
	}
	connLimits, reserve, short := connectionLimits(files, switches, demo, cfg.MaxConnections, cfg.MaxConnectionsPerSource)
	log.Info("open files", "limit", files, "raised_from", filesBefore, "reserved", reserve,
		"api_max_connections", connLimits.MaxConns, "api_max_connections_per_source", connLimits.MaxPerSource)
	if short {
		log.Warn("the open-file limit leaves the API fewer connections than --max-connections asks: a flood could exhaust it; raise the hard limit (ulimit -Hn, LimitNOFILE=)",
			"limit", files, "reserved", reserve, "max_connections", connLimits.MaxConns)
	}
	guard := httpserve.NewGuard(lis, connLimits, "api", log.With("component", "api"), s.Registry)
	guard.Attach(srv)
	if cfg.AdvertiseURL == "" {
		s.Advertise(advertiseURL(lis.Addr().String(), serverTLS != nil))
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.Run(ctx) })
	g.Go(func() error { return httpserve.Serve(ctx, srv, guard, log) })
	g.Go(func() error { return announce(ctx, s, cfg, lis.Addr().String(), started, log) })
	if demo && cfg.Workload != "none" {
		id, err := s.Fabric.StartWorkload(fabricsim.WorkloadSpec{Pattern: cfg.Workload, Gbps: cfg.Gbps, QPsPerConnection: cfg.QPs, Seed: cfg.Seed})
		if err != nil {
			return err
		}
		log.Info("workload started", "id", id, "pattern", cfg.Workload, "gbps_per_host", cfg.Gbps, "qps", cfg.QPs,
			"figures", "/sim/v1/workloads/"+id)
		if cfg.DeclareIntents {
			g.Go(func() error { return reserveWorkload(ctx, s, id, cfg.Intents.Headroom, log) })
		}
	}
	err = g.Wait()
	log.Info("accelnet stopped", "ran_for", time.Since(started).Round(time.Millisecond))
	return err
}

// prepareDataDir makes and locks the data directory (emptied first with
// --fresh) and sends the libraries' logs there; release unlocks it.
func prepareDataDir(cfg Config) (release func(), err error) {
	if cfg.DataDir == "" {
		return func() {}, nil
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	release, err = lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if cfg.Fresh {
		err = freshDataDir(cfg.DataDir)
	}
	if err == nil {
		err = fabricsim.SetLibraryLogDir(filepath.Join(cfg.DataDir, "logs"))
	}
	if err != nil {
		release()
		return nil, err
	}
	return release, nil
}

// runConfig is the stack's configuration for a run: the flags', the
// operator token, etcd's place, the topology, and what to do with stored
// state of another fabric; where names the state's place for messages.
func (cfg Config) runConfig(demo bool, log *slog.Logger) (opts stack.Config, where string, err error) {
	var topo *models.Topology
	if cfg.TopologySpec != "" {
		spec := cfg.TopologySpec
		if demo && topology.IsSpec(spec) && !strings.Contains(spec, "@") {
			spec = fmt.Sprintf("%s@%g", spec, cfg.Gbps)
		}
		t, err := topology.Load(spec)
		if err != nil {
			return stack.Config{}, "", err
		}
		topo = &t
		if demo {
			logSizing(log, t, cfg.sizeDemo(t, cfg.flagSet))
		}
	}
	opts = cfg.stackConfig(demo, log)
	opts.Topology = topo
	if cfg.DataDir != "" {
		opts.OperatorTokenFile = filepath.Join(cfg.DataDir, "operator.token")
	}
	if cfg.OperatorTokenFile != "" {
		data, err := os.ReadFile(cfg.OperatorTokenFile)
		if err != nil {
			return stack.Config{}, "", fmt.Errorf("--operator-token-file: %w", err)
		}
		opts.OperatorTokenGiven = strings.TrimSpace(string(data))
	}
	if len(cfg.Etcd.Endpoints) == 0 {
		opts.Etcd.Dir = filepath.Join(cfg.DataDir, "etcd")
	}
	where = "etcd"
	if len(cfg.Etcd.Endpoints) == 0 {
		where = cfg.DataDir
	}
	opts.OnOtherFabric = func(o stack.OtherFabric) error {
		if demo && !cfg.Keep && !cfg.Fresh {
			return fmt.Errorf("%s: %s. Start with --fresh to discard it, or --keep to keep it", where, o)
		}
		fmt.Printf("\n%s: %s.\n\n", where, o)
		log.Warn("the stored state is of another fabric", "intents", o.Intents, "intents_stranded", o.Stranded, "drains", o.Drains, "drains_dangling", o.Dangling)
		return nil
	}
	return opts, where, nil
}

// greet says, on a first start, the operator token (printed once, never
// logged), else what an earlier run left that changes what one sees.
func greet(ctx context.Context, s *stack.Stack, cfg Config, tokenFile, where string, demo bool, log *slog.Logger) {
	if s.OperatorToken != "" && cfg.OperatorTokenFile != "" {
		log.Info("first start: the operator token of --operator-token-file is registered", "file", cfg.OperatorTokenFile)
	} else if s.OperatorToken != "" {
		// Printed once, never logged: it is the key to everything.
		fmt.Printf("\nFirst start: the operator token is\n\n  %s\n\n", s.OperatorToken)
		if tokenFile != "" {
			fmt.Printf("It is also in %s (mode 0600). It will not be shown again.\n\n", tokenFile)
		}
	} else if line := reloaded(ctx, s.Store); line != "" {
		// An earlier run's state changes what the demo shows: say so.
		fmt.Printf("\nReloaded from %s: %s.", where, line)
		if demo {
			fmt.Printf(" (accelnet demo --fresh starts clean.)")
		}
		fmt.Printf("\n\n")
	}
}

// reserveWorkload waits for the fabric, lets the workload run on ECMP for
// a few seconds, declares its flows as intents and logs how the throughput
// ratio changes and how long it took to reach 0.95.
func reserveWorkload(ctx context.Context, s *stack.Stack, id string, headroom float64, log *slog.Logger) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	ratio := func() float64 {
		f, err := s.Fabric.WorkloadFigures(id)
		if err != nil {
			return 0
		}
		return f.ThroughputRatio
	}
	settle := time.After(3 * time.Second)
	for waiting := true; waiting; {
		select {
		case <-ctx.Done():
			return nil
		case <-settle:
			waiting = s.Controller.Ready() != nil
		case <-tick.C:
		}
	}
	before := ratio()
	start := time.Now()
	n, err := s.ReserveWorkload(ctx, id, "jobs", headroom)
	if err != nil {
		log.Warn("not every workload flow could be reserved", "admitted", n, "err", err)
	}
	deadline := time.After(60 * time.Second)
	for ratio() < 0.95 {
		select {
		case <-ctx.Done():
			return nil
		case <-deadline:
			log.Warn("throughput ratio did not reach 0.95 in 60 s", "before", before, "now", ratio())
			return nil
		case <-tick.C:
		}
	}
	log.Info("workload flows placed as intents", "intents", n, "throughput_ratio_before", fmt.Sprintf("%.3f", before),
		"throughput_ratio_after", fmt.Sprintf("%.3f", ratio()), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// advertiseURL is where other replicas reach an API listening on addr:
// the host's name when it listens on every address.
func advertiseURL(addr string, https bool) string {
	scheme := "http://"
	if https {
		scheme = "https://"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return scheme + addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		if name, err := os.Hostname(); err == nil {
			host = name
		} else {
			host = "localhost"
		}
	}
	return scheme + net.JoinHostPort(host, port)
}

// apiTLS builds the API's server TLS (nil: plain HTTP) and the transport
// a follower forwards to the leader with (nil: the default).
func apiTLS(cfg Config) (*tls.Config, http.RoundTripper, error) {
	if cfg.TLSCert == "" {
		return nil, nil, nil
	}
	server, err := pki.Files{CA: cfg.TLSClientCA, Cert: cfg.TLSCert, Key: cfg.TLSKey}.ServerConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("API %w", err)
	}
	if cfg.TLSClientCA != "" {
		// Verified when given; required by the handler for everything but
		// the probes (northbound.RequireClientCert).
		server.ClientAuth = tls.VerifyClientCertIfGiven
	}
	client := pki.Files{CA: cfg.TLSCA, ServerName: cfg.TLSServerName}
	if cfg.TLSClientCA != "" { // the leader wants a certificate from us too
		client.Cert, client.Key = cfg.TLSCert, cfg.TLSKey
	}
	clientTLS, err := client.ClientConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("forwarding %w", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = clientTLS
	return server, tr, nil
}

// announce logs once when every switch is programmed, with the start-up time.
func announce(ctx context.Context, s *stack.Stack, cfg Config, addr string, started time.Time, log *slog.Logger) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if s.Controller.Ready() != nil {
			continue
		}
		snap, _ := s.Controller.Snapshot()
		url := advertiseURL(addr, cfg.TLSCert != "")
		if !s.Controller.Leading() {
			leader, _ := s.Leadership.Leader()
			log.Info("accelnet ready as a follower: serving reads, forwarding writes to the leader", "leader", leader,
				"startup", time.Since(started).Round(time.Millisecond), "api", url+"/api/v1/topology")
			return nil
		}
		log.Info("accelnet ready: every switch programmed",
			"startup", time.Since(started).Round(time.Millisecond),
			"switches", len(snap.Switches()), "links", len(snap.Links()), "hosts", len(snap.Hosts()),
			"api", url+"/api/v1/topology")
		return nil
	}
}
