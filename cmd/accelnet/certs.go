package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/accelnet/accelnet/internal/pki"
)

// newCertsCommand makes a deployment's certificates: the first-run step
// of the shipped compose file (an init service) and Kubernetes manifests
// (a Job that keeps them in Secrets).
func newCertsCommand() *cobra.Command {
	var dir, kubeNamespace string
	var kube bool
	cmd := &cobra.Command{
		Use:   "certs NAME[=HOST,…] …",
		Short: "Make a CA and a certificate per name (the first-run step of the shipped deployments)",
		Long: `Make a CA (ca.crt, ca.key) in --dir and, for each NAME, NAME.crt and NAME.key
signed by it, valid for NAME, the HOSTs given after it, localhost and 127.0.0.1,
for server and client authentication alike (an accelnet replica is both).
What is there already is kept while it is valid for a month more and names
every host, so running it again (each start of a deployment) changes nothing
until a certificate nears its end. Keys are written with mode 0600.

With --kubernetes it runs in a Job instead: the CA and the certificates are
kept in Secrets of its namespace (kubernetes.io/tls, with ca.crt: the layout
cert-manager writes, so cert-manager can take over), with an operator token
in the Secret accelnet-operator-token; what exists is kept.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("name at least one certificate (e.g. accelnet etcd1 fabricsim=fabricsim.lab)")
			}
			names := map[string][]string{}
			var order []string
			for _, a := range args {
				name, hosts, _ := strings.Cut(a, "=")
				if name == "" || strings.ContainsAny(name, `/\`) {
					return fmt.Errorf("%q: want NAME or NAME=HOST,HOST", a)
				}
				all := []string{name, "localhost", "127.0.0.1"}
				if hosts != "" {
					all = append(all, strings.Split(hosts, ",")...)
				}
				slices.Sort(all)
				names[name] = slices.Compact(all)
				order = append(order, name)
			}
			if kube {
				return kubeCerts(cmd.Context(), cmd.OutOrStdout(), kubeNamespace, order, names)
			}
			ca, err := pki.LoadOrCreateCA(dir, "accelnet deployment CA")
			if err != nil {
				return err
			}
			for _, name := range order {
				f, err := ca.Issue(name, names[name])
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %s, %s (for %s)\n", name, filepath.Base(f.Cert), filepath.Base(f.Key), strings.Join(names[name], ", "))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "CA: %s\n", ca.CertFile)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "certs", "directory of the CA and the certificates (made with mode 0700)")
	cmd.Flags().BoolVar(&kube, "kubernetes", false, "keep them in Secrets of this pod's namespace, through the Kubernetes API (run as a Job)")
	cmd.Flags().StringVar(&kubeNamespace, "namespace", "", "with --kubernetes: the namespace (default: this pod's)")
	return cmd
}
