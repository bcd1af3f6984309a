package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/accelnet/accelnet/internal/httpserve"
	"github.com/accelnet/accelnet/store/embedded"
)

// newEtcdCommand runs one member of an etcd cluster (the etcd server
// library accelnet embeds), for deployments that have no etcd: the
// compose file's three members are this command.
func newEtcdCommand() *cobra.Command {
	var m embedded.Member
	cmd := &cobra.Command{
		Use:   "etcd",
		Short: "Run one member of an etcd cluster (the embedded etcd server, for deployments without their own etcd)",
		Long: `Run one member of an etcd cluster with the etcd server accelnet embeds
(go.etcd.io/etcd/server/v3). Start every member of a new cluster with the same
--initial-cluster; a restarted member rejoins from its --data-dir. Production
sites with an etcd cluster of their own point accelnet serve at it instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m.Dir = cmd.Flag("data-dir").Value.String()
			if m.Name == "" || m.ClientAddr == "" || m.PeerAddr == "" {
				return errors.New("--name, --client-addr and --peer-addr are required")
			}
			if err := os.MkdirAll(m.Dir, 0o700); err != nil {
				return fmt.Errorf("data dir: %w", err)
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, nil))
			m.Logger = log
			start := time.Now()
			e, err := embedded.StartMember(m)
			if err != nil {
				return err
			}
			defer e.Close()
			log.Info("etcd member ready", "name", m.Name, "client", m.ClientAddr, "peer", m.PeerAddr, "took", time.Since(start).Round(time.Millisecond))
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			<-ctx.Done()
			log.Info("etcd member stopping", "name", m.Name)
			return nil
		},
	}
	cmd.Flags().StringVar(&m.Name, "name", "", "this member's name in --initial-cluster")
	cmd.Flags().StringVar(&m.ClientAddr, "client-addr", "", "host:port clients reach this member at")
	cmd.Flags().StringVar(&m.PeerAddr, "peer-addr", "", "host:port the other members reach this member at")
	cmd.Flags().StringVar(&m.ListenClientAddr, "listen-client-addr", "", "where to listen for clients (default --client-addr), e.g. 0.0.0.0:2379")
	cmd.Flags().StringVar(&m.ListenPeerAddr, "listen-peer-addr", "", "where to listen for peers (default --peer-addr), e.g. 0.0.0.0:2380")
	cmd.Flags().StringVar(&m.InitialCluster, "initial-cluster", "", "every member as name=http://peer-addr (https:// with --peer-tls-*), comma-separated (empty: a single member)")
	cmd.Flags().StringVar(&m.ClientTLS.Cert, "tls-cert", "", "PEM certificate: serve clients over TLS (with --tls-key)")
	cmd.Flags().StringVar(&m.ClientTLS.Key, "tls-key", "", "PEM key of --tls-cert")
	cmd.Flags().StringVar(&m.ClientTLS.CA, "tls-client-ca", "", "PEM CA bundle: serve only clients presenting a certificate it signed (accelnet serve --etcd-cert)")
	cmd.Flags().StringVar(&m.PeerTLS.Cert, "peer-tls-cert", "", "PEM certificate for the other members (mutual TLS, with --peer-tls-key and --peer-tls-ca)")
	cmd.Flags().StringVar(&m.PeerTLS.Key, "peer-tls-key", "", "PEM key of --peer-tls-cert")
	cmd.Flags().StringVar(&m.PeerTLS.CA, "peer-tls-ca", "", "PEM CA bundle that the other members' certificates are verified against")
	cmd.Flags().StringVar(&m.MetricsAddr, "listen-metrics-addr", "", "host:port serving /health and /metrics over plain HTTP, without client certificates, for health checks (e.g. 127.0.0.1:2381)")
	return cmd
}

// newProbeCommand is a container's health check, where no curl exists.
func newProbeCommand() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "probe URL",
		Short: "GET URL and exit 0 if it answers 200 (a container health check)",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return httpserve.Probe(args[0], timeout)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the answer")
	return cmd
}
