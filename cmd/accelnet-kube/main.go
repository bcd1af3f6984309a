// Command accelnet-kube publishes the fabric's shape to Kubernetes'
// schedulers and keeps it following the live fabric. It is its own
// binary, apart from accelnet's, so the controller links no Kubernetes
// client and this no etcd, switch driver or controller: it talks to
// accelnet only through its REST API.
package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/accelnet/accelnet/apiclient"
	"github.com/accelnet/accelnet/internal/httpserve"
	"github.com/accelnet/accelnet/internal/pki"
	"github.com/accelnet/accelnet/kube"
	"github.com/accelnet/accelnet/models"
)

// kubeOptions are accelnet kube's flags.
type kubeOptions struct {
	server, tokenFile, caFile, serverName string
	kubeconfig                            string
	topology                              string
	taint                                 bool
	resync                                time.Duration
	leaseNamespace, leaseName, identity   string
	metricsAddr                           string
	tenants, groupBy                      []string
	retryRefused                          time.Duration
}

func main() {
	if err := newKubeCommand().Execute(); err != nil {
		os.Exit(1)
	}
}

// version is set at link time (-ldflags "-X main.version=...").
var version = "dev"

func newKubeCommand() *cobra.Command {
	o := kubeOptions{server: "http://localhost:8080", topology: "accelnet", resync: time.Minute, leaseName: "accelnet-kube", metricsAddr: ":8090",
		groupBy: kube.DefaultGroupBy, retryRefused: 30 * time.Second}
	cmd := &cobra.Command{
		Use:          "accelnet-kube",
		SilenceUsage: true,
		Version:      version,
		Short:        "Publish the fabric's shape to Kubernetes' schedulers (node labels, Kueue Topology, Volcano HyperNodes)",
		Long: `Publish the fabric's shape to Kubernetes, and keep it following the live fabric.

Each node is mapped to its fabric hosts (one per RDMA NIC): those named by
its accelnet.io/fabric-hosts annotation (host names or addresses,
comma-separated), else those whose address is one of the node's; a node
with none, or naming a host the fabric lacks, or claiming another node's
host, is reported (an Event and the accelnet.io/fabric-hosts-found
annotation), never guessed. Nodes on the fabric get the labels
accelnet.io/fabric, accelnet.io/fabric-block (their pod, or the leaves
that share their spines), accelnet.io/fabric-leaf (their leaf, or their
group of rail leaves) and accelnet.io/fabric-rail; a Kueue Topology with
those levels; Volcano HyperNodes per leaf (tier 1), block (tier 2) and
fabric (tier 3). A node whose leaf is drained, down or cut off from every
spine, or whose NIC's link is down, is degraded: label
accelnet.io/fabric-degraded=true, condition FabricDegraded, out of the
HyperNodes (and tainted with --taint-degraded). Custom resources whose CRDs
are not installed are skipped (and published once they are).

With --tenant, it also reserves the fabric for jobs. Pods annotated
accelnet.io/collective (ring-allreduce, all-to-all or none) and
accelnet.io/gbps-per-gpu are grouped (--group-by: a label's value, or the
pods' controller) and, once every pod of a group is bound to a node, the
group gets one collective intent over its nodes' fabric hosts, with
sampled flows (no UDP ports), named k8s:NAMESPACE/GROUP, for the tenant
its namespace maps to. Each pod's accelnet.io/fabric condition says how
it stands (True once the intent is Installed: put it in the pod's
readinessGates and the pod is not Ready before), and Events on the job
say when it is reserved, refused (why, and what fits) or released. The
intent is released when the group's pods finish or are deleted, and made
again if accelnet lost it; a refused one is asked again every
--retry-refused. This needs --token-file: an operator token, or the
tenant's own if every namespace maps to one tenant.

It talks to accelnet only through its REST API (the topology needs no
token), to Kubernetes with the in-cluster service account or a
kubeconfig, and acts only while it holds a Lease (run two for a quick
takeover).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runKube(ctx, o, slog.New(slog.NewTextHandler(os.Stderr, nil)))
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.server, "server", o.server, "accelnet's API URL")
	f.StringVar(&o.tokenFile, "token-file", "", "file holding a token for accelnet's API (the topology needs none)")
	f.StringVar(&o.caFile, "ca-file", "", "PEM CA bundle that verifies accelnet's HTTPS certificate (default: the system's roots)")
	f.StringVar(&o.serverName, "tls-server-name", "", "name to verify in accelnet's certificate (default: the host of --server)")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, else the in-cluster service account)")
	f.StringVar(&o.topology, "kueue-topology", o.topology, "name of the Kueue Topology to keep (\"\": none)")
	f.BoolVar(&o.taint, "taint-degraded", false, "also taint a degraded node accelnet.io/fabric-degraded=true:NoSchedule")
	f.DurationVar(&o.resync, "resync", o.resync, "publish everything again this often, even if nothing was seen to change")
	f.StringVar(&o.leaseNamespace, "lease-namespace", "", "namespace of the Lease that elects the acting replica (default: $POD_NAMESPACE, else default)")
	f.StringVar(&o.leaseName, "lease-name", o.leaseName, "name of that Lease")
	f.StringVar(&o.identity, "identity", "", "this replica's name in the Lease (default: $POD_NAME, else host name and process ID)")
	f.StringVar(&o.metricsAddr, "metrics-addr", o.metricsAddr, "address of /healthz, /readyz and /metrics (\"\": none)")
	f.StringArrayVar(&o.tenants, "tenant", nil, "NAMESPACE=TENANT: jobs in the namespace reserve for that accelnet tenant (NAMESPACE * for every other); repeat it")
	f.StringSliceVar(&o.groupBy, "group-by", o.groupBy, "how pods group into jobs, the first that applies: label keys (the group is the value), or owner (the pods' controller)")
	f.DurationVar(&o.retryRefused, "retry-refused", o.retryRefused, "how long a job whose intent was refused waits before asking again")
	return cmd
}

// kubeRestConfig is the Kubernetes client configuration: a kubeconfig
// (the flag, $KUBECONFIG or ~/.kube/config), else the pod's service
// account.
func kubeRestConfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err == nil {
		return cfg, nil
	}
	if path == "" && clientcmd.IsEmptyConfig(err) {
		in, inErr := rest.InClusterConfig()
		if inErr == nil {
			return in, nil
		}
		return nil, fmt.Errorf("no kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config) and not in a pod: %w", inErr)
	}
	return nil, fmt.Errorf("kubeconfig: %w", err)
}

// accelnetClient is the REST client of accelnet's API the options give:
// its address, token and CA.
func accelnetClient(o kubeOptions) (*apiclient.Client, error) {
	ac := &apiclient.Client{Server: o.server}
	if o.tokenFile != "" {
		tok, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		ac.Token = strings.TrimSpace(string(tok))
	}
	if o.caFile != "" || o.serverName != "" {
		tlsCfg, err := pki.Files{CA: o.caFile, ServerName: o.serverName}.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		ac.HTTP = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg, Proxy: http.ProxyFromEnvironment}}
	}
	return ac, nil
}

func runKube(ctx context.Context, o kubeOptions, log *slog.Logger) error {
	kcfg, err := kubeRestConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	ac, err := accelnetClient(o)
	if err != nil {
		return err
	}
	tenants, err := parseTenants(o.tenants)
	if err != nil {
		return err
	}
	if len(tenants) > 0 && ac.Token == "" {
		return fmt.Errorf("--tenant needs --token-file: a token that may create the tenants' intents")
	}
	ns := cmp.Or(o.leaseNamespace, os.Getenv("POD_NAMESPACE"), "default")
	identity := cmp.Or(o.identity, os.Getenv("POD_NAME"))

	reg := prometheus.NewRegistry()
	leading := prometheus.NewGauge(prometheus.GaugeOpts{Name: "accelnet_kube_leading", Help: "1 while this replica holds the Lease and publishes"})
	publishes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "accelnet_kube_publishes_total", Help: "publishes of the fabric, by result"}, []string{"result"})
	writes := prometheus.NewCounter(prometheus.CounterOpts{Name: "accelnet_kube_writes_total", Help: "Kubernetes objects written (nodes, HyperNodes, the Topology)"})
	nodes := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "accelnet_kube_nodes", Help: "nodes by place: on the fabric, degraded, off it (not mapped)"}, []string{"state"})
	hyper := prometheus.NewGauge(prometheus.GaugeOpts{Name: "accelnet_kube_hypernodes", Help: "HyperNodes kept (-1: the CRD is not installed)"})
	looks := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "accelnet_kube_job_looks_total",
		Help: "looks at a job's pod group, by the pods' condition reason (Installed, Refused, WaitingForPods…; error: to be tried again)"}, []string{"reason"})
	released := prometheus.NewCounter(prometheus.CounterOpts{Name: "accelnet_kube_job_intents_released_total", Help: "intents of jobs released (the group gone, or one too many)"})
	reg.MustRegister(leading, publishes, writes, nodes, hyper, looks, released)
	var ready atomic.Bool

	errc := make(chan error, 2)
	if o.metricsAddr != "" {
		lis, err := net.Listen("tcp", o.metricsAddr)
		if err != nil {
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
		// Ready: the last publish succeeded, or this replica is standing by.
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			if !ready.Load() {
				http.Error(w, "the last publish failed", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "ok")
		})
		srvCtx, stop := context.WithCancel(ctx)
		defer stop()
		go func() {
			if err := httpserve.Serve(srvCtx, httpserve.NewServer(mux, nil), lis, log); err != nil {
				errc <- err
			}
		}()
	}
	ready.Store(true)
	klog.SetSlogLogger(log) // client-go's lines (leader election, watches) in the same form
	log.Info("accelnet kube", "accelnet", o.server, "kubernetes", kcfg.Host, "lease", ns+"/"+o.leaseName, "kueue_topology", o.topology)
	go func() {
		errc <- kube.Run(ctx, kube.Config{
			Accelnet: ac, Kube: kcfg, Topology: o.topology, Taint: o.taint, Resync: o.resync,
			LeaseNamespace: ns, LeaseName: o.leaseName, Identity: identity, Log: log,
			Tenants: tenants, GroupBy: o.groupBy, RetryRefused: o.retryRefused,
			Reserved: func(r kube.Reserved, err error) {
				reason := r.Reason
				if err != nil {
					reason = "error"
				}
				if reason != "" {
					looks.WithLabelValues(reason).Inc()
				}
				released.Add(float64(r.Released))
			},
			Leading: func(on bool) {
				leading.Set(map[bool]float64{true: 1, false: 0}[on])
				ready.Store(true)
			},
			Published: func(p kube.Published, err error) {
				writes.Add(float64(p.Writes))
				nodes.WithLabelValues("on_fabric").Set(float64(p.OnFabric - p.Degraded))
				nodes.WithLabelValues("degraded").Set(float64(p.Degraded))
				nodes.WithLabelValues("off").Set(float64(p.Off))
				hyper.Set(float64(p.HyperNodes))
				result := "ok"
				if err != nil {
					result = "error"
				}
				publishes.WithLabelValues(result).Inc()
				ready.Store(err == nil)
			},
		})
	}()
	return <-errc
}

// parseTenants reads --tenant's NAMESPACE=TENANT pairs.
func parseTenants(pairs []string) (map[string]models.TenantName, error) {
	out := map[string]models.TenantName{}
	for _, p := range pairs {
		ns, t, ok := strings.Cut(p, "=")
		tenant := models.TenantName(strings.TrimSpace(t))
		ns = strings.TrimSpace(ns)
		if !ok || ns == "" {
			return nil, fmt.Errorf("--tenant %q: want NAMESPACE=TENANT", p)
		}
		if err := tenant.Validate(); err != nil {
			return nil, fmt.Errorf("--tenant %q: %w", p, err)
		}
		if _, dup := out[ns]; dup {
			return nil, fmt.Errorf("--tenant: namespace %s is mapped twice", ns)
		}
		out[ns] = tenant
	}
	return out, nil
}
