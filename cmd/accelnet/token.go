package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/accelnet/accelnet/internal/pki"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store"
	"github.com/accelnet/accelnet/store/embedded"
	"github.com/accelnet/accelnet/tenancy"
)

// newTokenCommand issues a token straight into etcd, for whoever holds
// the data directory (the embedded etcd's certificates) or the etcd
// cluster's credentials: the way back in when every operator token is
// lost, and how a deployment issues its first one.
func newTokenCommand(dataDir *string) *cobra.Command {
	var (
		role, tenant, out string
		endpoints         []string
		etcdTLS           pki.Files
	)
	create := &cobra.Command{
		Use:   "create",
		Short: "Issue a token straight into etcd (the recovery path when no operator token is left)",
		Long: `Issue a token straight into etcd, without the REST API: the way back in for
whoever holds the data directory or the etcd cluster's credentials when no
operator token is left (or none was ever seen). With the embedded etcd it
works whether accelnet runs on --data-dir (it connects with the client
certificate in the directory) or not (it starts the etcd itself). The
secret is printed once (or written to --out, mode 0600); only its hash is
stored.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t := models.Token{Role: models.TokenRole(role), Tenant: models.TenantName(tenant)}
			if err := t.Validate(); err != nil {
				return fmt.Errorf("--role %q --tenant %q: %w", role, tenant, err)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			cli, done, err := tokenEtcd(ctx, *dataDir, endpoints, etcdTLS)
			if err != nil {
				return err
			}
			defer done()
			tok, secret, err := tenancy.NewAuth(store.NewStore(cli, 10*time.Second)).CreateToken(ctx, t)
			if err != nil {
				return fmt.Errorf("issue the token: %w", err)
			}
			if out != "" {
				if err := os.WriteFile(out, []byte(secret+"\n"), 0o600); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Token %s (%s) written to %s (mode 0600).\n", tok.ID, tok.Role, out)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Token %s (%s). Its secret, shown once:\n\n  %s\n\n", tok.ID, tok.Role, secret)
			return nil
		},
	}
	create.Flags().StringVar(&role, "role", string(models.RoleOperator), "operator or tenant")
	create.Flags().StringVar(&tenant, "tenant", "", "the tenant of a tenant token")
	create.Flags().StringVar(&out, "out", "", "write the secret to this file (mode 0600) instead of printing it")
	create.Flags().StringSliceVar(&endpoints, "etcd-endpoints", nil, "an etcd cluster (host:port,…); empty: the embedded etcd of --data-dir")
	create.Flags().StringVar(&etcdTLS.CA, "etcd-ca", "", "PEM CA bundle that verifies the etcd cluster's certificates")
	create.Flags().StringVar(&etcdTLS.Cert, "etcd-cert", "", "PEM client certificate presented to etcd")
	create.Flags().StringVar(&etcdTLS.Key, "etcd-key", "", "PEM key of --etcd-cert")
	token := &cobra.Command{Use: "token", Short: "Issue tokens straight into etcd (recovery)", Args: cobra.NoArgs}
	token.AddCommand(create)
	return token
}

// tokenEtcd connects to the etcd a token is issued in: a cluster, the
// embedded etcd of a running accelnet on dataDir, or that etcd started
// here (the data directory locked meanwhile).
func tokenEtcd(ctx context.Context, dataDir string, endpoints []string, files pki.Files) (*clientv3.Client, func(), error) {
	if len(endpoints) > 0 {
		cli, err := stack.DialEtcd(endpoints, files)
		if err != nil {
			return nil, nil, err
		}
		return cli, func() { cli.Close() }, nil
	}
	if dataDir == "" {
		return nil, nil, errors.New("give --data-dir (the embedded etcd's) or --etcd-endpoints")
	}
	etcdDir := filepath.Join(dataDir, "etcd")
	if _, err := os.Stat(filepath.Join(etcdDir, "member")); err != nil {
		return nil, nil, fmt.Errorf("%s holds no etcd data (is it accelnet's --data-dir?): %w", dataDir, err)
	}
	release, lockErr := lockDataDir(dataDir)
	if lockErr == nil {
		// Nothing runs on it: run its etcd here, as long as the command.
		e, err := embedded.Start(etcdDir, "", slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			release()
			return nil, nil, err
		}
		cli, err := store.Dial(e.Endpoints, e.ClientTLS)
		if err != nil {
			e.Close()
			release()
			return nil, nil, err
		}
		return cli, func() { cli.Close(); e.Close(); release() }, nil
	}
	// accelnet runs on it: reach its etcd with the directory's certificate.
	addr, err := os.ReadFile(filepath.Join(etcdDir, embedded.EndpointFile))
	if err != nil {
		return nil, nil, fmt.Errorf("%v; and its etcd's address is not in %s: %w", lockErr, etcdDir, err)
	}
	cfg, err := embedded.ClientFiles(etcdDir).ClientConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("the embedded etcd's client %w", err)
	}
	cli, err := store.Dial([]string{strings.TrimSpace(string(addr))}, cfg)
	if err != nil {
		return nil, nil, err
	}
	return cli, func() { cli.Close() }, nil
}
