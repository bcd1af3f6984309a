// Command fabricsim runs an emulated fabric on its own: every switch serves
// P4Runtime and gNMI on a loopback port, and the control API (flows,
// workloads, link faults) listens on --http-addr. It writes the topology,
// with each switch's address filled in, to --out, ready for
// `accelnet serve --topology`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/accelnet/accelnet/fabricsim"
	"github.com/accelnet/accelnet/internal/httpserve"
	"github.com/accelnet/accelnet/internal/pki"
	"github.com/accelnet/accelnet/topology"
)

// Config is fabricsim's command line.
type Config struct {
	Topology      string
	ListenHost    string
	AdvertiseHost string
	// Probe, if set, is a URL to GET: exit 0 on 200 (a container's
	// health check, where no curl exists).
	Probe    string
	HTTPAddr string
	Out      string
	LogDir   string
	// CounterInterval is how often counters advance and are published.
	CounterInterval time.Duration
	// TLS for the switches' P4Runtime and gNMI: certificate and key, and
	// a CA to require client certificates from (mutual TLS).
	TLS pki.Files
}

// Validate checks the flags.
func (c Config) Validate() error {
	if c.Topology == "" {
		return errors.New("-topology is required (a file, or leafspine:LEAVESxHOSTSxSPINES, fattree:K)")
	}
	if c.Out == "" {
		return errors.New("-out is required")
	}
	return nil
}

func main() {
	cfg := Config{ListenHost: "127.0.0.1", HTTPAddr: "127.0.0.1:8081", Out: "fabricsim-topology.yaml", LogDir: "fabricsim-logs"}
	flag.StringVar(&cfg.Topology, "topology", "leafspine:8x8x4", "fabric: a topology file, leafspine:LEAVESxHOSTSxSPINES[@GBPS] or fattree:K[@GBPS]")
	flag.StringVar(&cfg.ListenHost, "listen-host", cfg.ListenHost, "address the switches listen on (one port each)")
	flag.StringVar(&cfg.AdvertiseHost, "advertise-host", "", "host written into the switches' addresses in -out (default: -listen-host); e.g. the container's name with -listen-host 0.0.0.0")
	flag.StringVar(&cfg.Probe, "probe", "", "only GET this URL and exit 0 if it answers 200 (a health check)")
	flag.StringVar(&cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, "control API address (/sim/v1/…)")
	flag.StringVar(&cfg.Out, "out", cfg.Out, "where to write the topology with switch addresses")
	flag.DurationVar(&cfg.CounterInterval, "counter-interval", 500*time.Millisecond, "how often counters advance and are published over gNMI (a fabric of thousands of switches wants seconds)")
	flag.StringVar(&cfg.LogDir, "log-dir", cfg.LogDir, "directory for the gnmi library's logs")
	flag.StringVar(&cfg.TLS.Cert, "tls-cert", "", "PEM certificate: the switches serve P4Runtime and gNMI over TLS (with -tls-key)")
	flag.StringVar(&cfg.TLS.Key, "tls-key", "", "PEM key of -tls-cert")
	flag.StringVar(&cfg.TLS.CA, "tls-client-ca", "", "PEM CA bundle: require controllers to present a certificate it signed (mutual TLS)")
	flag.Parse()
	if cfg.Probe != "" {
		if err := httpserve.Probe(cfg.Probe, 5*time.Second); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(cfg, log); err != nil {
		log.Error("fabricsim failed", "err", err)
		os.Exit(1)
	}
}

func run(cfg Config, log *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := fabricsim.SetLibraryLogDir(cfg.LogDir); err != nil {
		return err
	}
	topo, err := topology.Load(cfg.Topology)
	if err != nil {
		return err
	}
	opts := fabricsim.Options{Topology: topo, ListenHost: cfg.ListenHost, AdvertiseHost: cfg.AdvertiseHost, Logger: log, CounterInterval: cfg.CounterInterval}
	if cfg.TLS.Enabled() {
		if opts.TLS, err = cfg.TLS.ServerConfig(); err != nil {
			return err
		}
	}
	f, err := fabricsim.New(opts)
	if err != nil {
		return err
	}
	out := append([]byte("# Written by fabricsim: the emulated fabric with its switches' addresses.\n"), topology.Format(f.Topology())...)
	if err := os.WriteFile(cfg.Out, out, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", cfg.Out, err)
	}
	abs, _ := filepath.Abs(cfg.Out)
	log.Info("topology written", "file", abs, "switches", len(topo.Switches))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	lis, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
	}
	// The control API, and Go's profiler beside it (a lab tool: no
	// authentication, like the rest of its API).
	mux := http.NewServeMux()
	mux.Handle("/sim/v1/", f.Handler())
	mux.Handle("/debug/pprof/", http.DefaultServeMux) // net/http/pprof's handlers
	srv := httpserve.NewServer(mux, nil)
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return f.Run(ctx) })
	g.Go(func() error { return httpserve.Serve(ctx, srv, lis, log) })
	log.Info("control API up", "url", "http://"+cfg.HTTPAddr+"/sim/v1/switches")
	return g.Wait()
}
