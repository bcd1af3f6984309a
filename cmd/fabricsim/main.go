// Command fabricsim runs an emulated fabric on its own: every switch serves
// P4Runtime and gNMI on a loopback port, and the control API (flows,
// workloads, link faults) listens on --http-addr. It writes the topology,
// with each switch's address filled in, to --out, ready for
// `accelnet serve --topology`.
package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
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
	"strings"
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
	// TokenFile holds the control API's bearer token; made (mode 0600)
	// if it does not exist.
	TokenFile string
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
	cfg := Config{ListenHost: "127.0.0.1", HTTPAddr: "127.0.0.1:8081", Out: "fabricsim-topology.yaml", LogDir: "fabricsim-logs", TokenFile: "fabricsim-control.token"}
	flag.StringVar(&cfg.Topology, "topology", "leafspine:8x8x4", "fabric: a topology file, leafspine:LEAVESxHOSTSxSPINES[@GBPS] or fattree:K[@GBPS]")
	flag.StringVar(&cfg.ListenHost, "listen-host", cfg.ListenHost, "address the switches listen on (one port each)")
	flag.StringVar(&cfg.AdvertiseHost, "advertise-host", "", "host written into the switches' addresses in -out (default: -listen-host); e.g. the container's name with -listen-host 0.0.0.0")
	flag.StringVar(&cfg.Probe, "probe", "", "only GET this URL and exit 0 if it answers 200 (a health check)")
	flag.StringVar(&cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, "control API address (/sim/v1/…)")
	flag.StringVar(&cfg.Out, "out", cfg.Out, "where to write the topology with switch addresses")
	flag.DurationVar(&cfg.CounterInterval, "counter-interval", 500*time.Millisecond, "how often counters advance and are published over gNMI (a fabric of thousands of switches wants seconds)")
	flag.StringVar(&cfg.LogDir, "log-dir", cfg.LogDir, "directory for the gnmi library's logs")
	flag.StringVar(&cfg.TokenFile, "token-file", cfg.TokenFile, "the control API's bearer token (it can take switches down and shows every flow): read from this file, or made and written there (mode 0600) if it does not exist; /healthz needs none")
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
	if err := writeAtomically(cfg.Out, out, 0o644); err != nil {
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
	token, made, err := controlToken(cfg.TokenFile)
	if err != nil {
		return err
	}
	if made {
		log.Info("control API token made", "file", cfg.TokenFile)
	}
	// The control API, and Go's profiler beside it, for the token's
	// holder; /healthz for health checks.
	mux := http.NewServeMux()
	mux.Handle("/sim/v1/", f.Handler())
	mux.Handle("/debug/pprof/", http.DefaultServeMux) // net/http/pprof's handlers
	srv := httpserve.NewServer(requireToken(token, mux), nil)
	guard := httpserve.NewGuard(lis, httpserve.Limits{MaxConns: 1024, MaxPerSource: 256}, "sim", log, nil)
	guard.Attach(srv)
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return f.Run(ctx) })
	g.Go(func() error { return httpserve.Serve(ctx, srv, guard, log) })
	log.Info("control API up", "url", "http://"+cfg.HTTPAddr+"/sim/v1/switches")
	return g.Wait()
}

// writeAtomically writes data to path so that a reader never sees part of
// it (accelnet serve may read the topology the moment it appears).
func writeAtomically(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// controlToken reads the control API's token from file, or makes one and
// writes it there (mode 0600).
func controlToken(file string) (token string, made bool, err error) {
	if file == "" {
		return "", false, errors.New("-token-file is empty: the control API takes a token")
	}
	data, err := os.ReadFile(file)
	if err == nil {
		token = strings.TrimSpace(string(data))
		if len(token) < 16 {
			return "", false, fmt.Errorf("-token-file %s: a token of at least 16 characters, please", file)
		}
		return token, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", false, fmt.Errorf("-token-file: %w", err)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", false, err
	}
	token = "anet_sim_" + base64.RawURLEncoding.EncodeToString(raw[:])
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return "", false, err
	}
	if err := writeAtomically(file, []byte(token+"\n"), 0o600); err != nil {
		return "", false, fmt.Errorf("-token-file: %w", err)
	}
	return token, true, nil
}

// requireToken serves h to requests with the bearer token, and /healthz to
// anyone; a request with the token marks its connection trusted.
func requireToken(token string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
			return
		}
		scheme, got, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(token)) != 1 {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("WWW-Authenticate", `Bearer realm="fabricsim"`)
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"the control API takes the bearer token of fabricsim's -token-file (Authorization: Bearer <token>)"}` + "\n"))
			return
		}
		httpserve.Trust(r.Context())
		h.ServeHTTP(w, r)
	})
}
