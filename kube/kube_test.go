package kube_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/accelnet/accelnet/apiclient"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/kubetest"
	"github.com/accelnet/accelnet/kube"
	"github.com/accelnet/accelnet/models"
)

// client-go's own log lines (leader election, informers) would land
// among a benchmark's results; the tests' loggers say what matters.
func init() { klog.SetSlogLogger(slog.New(slog.DiscardHandler)) }

// cluster is a real kube-apiserver with the schedulers' CRDs and accelnet
// kube's namespace and RBAC from deploy/k8s, and its admin's clients.
type cluster struct {
	*kubetest.Server
	core corev1client.CoreV1Interface
	dyn  dynamic.Interface
}

func newCluster(t testing.TB) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("runs kube-apiserver")
	}
	ks := kubetest.Start(t)
	ks.InstallCRDs(t, filepath.Join("testdata", "crds", "topology.volcano.sh_hypernodes.yaml"), filepath.Join("testdata", "crds", "kueue.x-k8s.io_topologies.yaml"))
	ks.Apply(t, filepath.Join("..", "deploy", "k8s", "namespace.yaml"))
	ks.Apply(t, filepath.Join("..", "deploy", "k8s", "accelnet-kube.yaml"), "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
	return adminClients(t, ks)
}

// adminClients is the cluster of ks with its admin's clients.
func adminClients(t testing.TB, ks *kubetest.Server) *cluster {
	t.Helper()
	core, err := corev1client.NewForConfig(ks.Config(kubetest.Admin))
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(ks.Config(kubetest.Admin))
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{Server: ks, core: core, dyn: dyn}
}

// addNode makes a Node (a real kubelet registers its own) with
// annotations and addresses.
func (c *cluster) addNode(t testing.TB, name string, annotations map[string]string, addrs ...string) {
	t.Helper()
	if _, err := c.core.Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations,
		Labels: map[string]string{"kubernetes.io/hostname": name}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(addrs) == 0 {
		return
	}
	// A stand-in kubelet may be writing the node too.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.core.Nodes().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.Addresses = nil
		for _, a := range addrs {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
		}
		_, err = c.core.Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (c *cluster) node(t testing.TB, name string) *corev1.Node {
	t.Helper()
	n, err := c.core.Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// hyperNodes are the HyperNodes by name: their tier and members.
func (c *cluster) hyperNodes(t testing.TB) map[string]string {
	t.Helper()
	list, err := c.dyn.Resource(kube.HyperNodes).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, h := range list.Items {
		tier, _, _ := unstructured.NestedInt64(h.Object, "spec", "tier")
		members, _, _ := unstructured.NestedSlice(h.Object, "spec", "members")
		var names []string
		for _, m := range members {
			name, _, _ := unstructured.NestedString(m.(map[string]any), "selector", "exactMatch", "name")
			names = append(names, name)
		}
		out[h.GetName()] = fmt.Sprintf("%d:%s", tier, strings.Join(names, ","))
	}
	return out
}

// events are the reasons of the Events recorded on a node.
func (c *cluster) events(t testing.TB, node string) []string {
	return c.eventsOf(t, metav1.NamespaceDefault, node)
}

// eventsOf are the reasons of the Events on an object of a namespace
// (default for a cluster-scoped one).
func (c *cluster) eventsOf(t testing.TB, ns, name string) []string {
	t.Helper()
	list, err := c.core.Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Reason)
	}
	return out
}

func condition(n *corev1.Node) corev1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == kube.ConditionDegraded {
			return c
		}
	}
	return corev1.NodeCondition{}
}

// testConfig is accelnet kube's configuration in the tests: as user,
// with leases and resyncs of seconds.
func testConfig(t testing.TB, c *cluster, accelnet *apiclient.Client, user, identity string) kube.Config {
	return kube.Config{
		Accelnet: accelnet, Kube: c.Config(user),
		Topology: "accelnet", LeaseNamespace: "accelnet", Identity: identity, Resync: 2 * time.Second, Log: fabrictest.Logger(t),
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond,
	}
}

// runKube runs accelnet kube as user until the returned stop is called;
// publishes counts its publishes, leading says whether it leads; tune
// adjusts its configuration.
func runKube(t testing.TB, c *cluster, h *fabrictest.Harness, user, identity string, publishes *atomic.Int64, leading *atomic.Bool, tune ...func(*kube.Config)) (stop func()) {
	t.Helper()
	cfg := testConfig(t, c, &apiclient.Client{Server: h.API.URL}, user, identity)
	cfg.Published = func(p kube.Published, err error) {
		if err != nil {
			t.Logf("%s: publish: %v", identity, err)
		}
		if publishes != nil {
			publishes.Add(1)
		}
	}
	cfg.Leading = func(on bool) {
		if leading != nil {
			leading.Store(on)
		}
	}
	for _, f := range tune {
		f(&cfg)
	}
	return keepRunning(t, cfg, false)
}

// keepRunning runs kube.Run with cfg until the returned stop is called. A
// failed Run fails the test, or with restart is started again, as a
// Deployment's pod would be (its Lease lost, say with the Kubernetes API
// away).
func keepRunning(t testing.TB, cfg kube.Config, restart bool) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			err := kube.Run(ctx, cfg)
			switch {
			case ctx.Err() != nil:
				return
			case !restart:
				if err != nil {
					t.Errorf("%s: %v", cfg.Identity, err)
				}
				return
			}
			t.Logf("%s: %v: starting again", cfg.Identity, err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
		})
	}
	t.Cleanup(stop)
	return stop
}

// TestPublishesTheFabric runs accelnet kube, with deploy/k8s's RBAC and
// nothing more, between a real accelnet and a real kube-apiserver: nodes
// mapped by address or annotation get their leaf and block labels, a node
// off the fabric is reported, the HyperNodes and the Kueue Topology
// appear; a drained leaf degrades its nodes and takes them out of the
// HyperNodes, and undraining restores them; what changed while accelnet
// kube was stopped is put right when it starts again.
func TestPublishesTheFabric(t *testing.T) {
	c := newCluster(t)
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 2))
	h.Eventually(t, 30*time.Second, "every switch in sync", func() bool { return h.Converged() == nil })
	c.addNode(t, "gpu-a", nil, "192.168.0.1", "10.0.1.1")                           // h1-1 by address
	c.addNode(t, "gpu-b", map[string]string{kube.AnnotationHosts: "h1-2"})          // by name
	c.addNode(t, "gpu-c", map[string]string{kube.AnnotationHosts: "h2-1,10.0.2.2"}) // two NICs on leaf2
	c.addNode(t, "cpu-1", nil, "192.168.0.2")                                       // not on the fabric

	var publishes atomic.Int64
	stop := runKube(t, c, h, kubetest.KubeServiceAccount, "kube-1", &publishes, nil)
	fabric := "leafspine-2x2x2"
	leaf1, leaf2, block := fabric+"-leaf1", fabric+"-leaf2", fabric+"-spines"
	wantHN := map[string]string{leaf1: "1:gpu-a,gpu-b", leaf2: "1:gpu-c", block: "2:" + leaf1 + "," + leaf2, fabric: "3:" + block}
	h.Eventually(t, time.Minute, "the HyperNodes of the fabric and the Kueue Topology", func() bool {
		_, err := c.dyn.Resource(kube.Topologies).Get(t.Context(), "accelnet", metav1.GetOptions{})
		return fmt.Sprint(c.hyperNodes(t)) == fmt.Sprint(wantHN) && err == nil
	})
	for name, want := range map[string]map[string]string{
		"gpu-a": {kube.LabelFabric: fabric, kube.LabelBlock: "spines", kube.LabelLeaf: "leaf1"},
		"gpu-b": {kube.LabelFabric: fabric, kube.LabelBlock: "spines", kube.LabelLeaf: "leaf1"},
		"gpu-c": {kube.LabelFabric: fabric, kube.LabelBlock: "spines", kube.LabelLeaf: "leaf2"},
	} {
		n := c.node(t, name)
		for k, v := range want {
			if n.Labels[k] != v {
				t.Errorf("%s: label %s=%q, want %q", name, k, n.Labels[k], v)
			}
		}
		if cond := condition(n); cond.Status != corev1.ConditionFalse {
			t.Errorf("%s: condition %+v, want False", name, cond)
		}
	}
	if got := c.node(t, "gpu-c").Annotations[kube.AnnotationFound]; got != "h2-1,h2-2" {
		t.Errorf("gpu-c found %q", got)
	}
	cpu := c.node(t, "cpu-1")
	if cpu.Labels[kube.LabelLeaf] != "" || !strings.HasPrefix(cpu.Annotations[kube.AnnotationFound], "none: no address") {
		t.Errorf("cpu-1: labels %v, annotation %q", cpu.Labels, cpu.Annotations[kube.AnnotationFound])
	}
	if !slices.Contains(c.events(t, "cpu-1"), "NotOnFabric") {
		t.Errorf("no NotOnFabric event for cpu-1: %v", c.events(t, "cpu-1"))
	}
	topo, err := c.dyn.Resource(kube.Topologies).Get(t.Context(), "accelnet", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	levels, _, _ := unstructured.NestedSlice(topo.Object, "spec", "levels")
	if fmt.Sprint(levels) != fmt.Sprintf("[map[nodeLabel:%s] map[nodeLabel:%s] map[nodeLabel:%s]]", kube.LabelBlock, kube.LabelLeaf, kube.LabelHostname) {
		t.Errorf("the Kueue Topology's levels: %v", levels)
	}

	// Drain leaf1: its nodes are degraded and leave the HyperNodes.
	var d models.Drain
	if r := h.Do(t, "POST", "/api/v1/drains", h.OperatorToken, models.Drain{Switch: "leaf1", Force: true, Reason: "optics"}, &d); r.StatusCode != http.StatusCreated {
		t.Fatalf("drain leaf1: HTTP %d", r.StatusCode)
	}
	h.Eventually(t, time.Minute, "leaf1's nodes degraded and out of the HyperNodes", func() bool {
		a := c.node(t, "gpu-a")
		got := c.hyperNodes(t)
		return a.Labels[kube.LabelDegraded] == "true" && condition(a).Status == corev1.ConditionTrue &&
			got[leaf1] == "" && got[block] == "2:"+leaf2
	})
	if msg := condition(c.node(t, "gpu-b")).Message; !strings.Contains(msg, "leaf1 is drained") {
		t.Errorf("gpu-b's condition says %q", msg)
	}
	if !slices.Contains(c.events(t, "gpu-a"), "FabricDegraded") {
		t.Errorf("gpu-a's events %v, want FabricDegraded", c.events(t, "gpu-a"))
	}
	if r := h.Do(t, "DELETE", "/api/v1/drains/"+d.ID, h.OperatorToken, nil, nil); r.StatusCode != http.StatusNoContent && r.StatusCode != http.StatusOK {
		t.Fatalf("undrain: HTTP %d", r.StatusCode)
	}
	h.Eventually(t, time.Minute, "leaf1's nodes restored", func() bool {
		a := c.node(t, "gpu-a")
		return a.Labels[kube.LabelDegraded] == "" && condition(a).Status == corev1.ConditionFalse && fmt.Sprint(c.hyperNodes(t)) == fmt.Sprint(wantHN)
	})
	if !slices.Contains(c.events(t, "gpu-a"), "FabricRestored") {
		t.Errorf("gpu-a's events %v, want FabricRestored", c.events(t, "gpu-a"))
	}

	// Stopped, while things change: a HyperNode of its own left over, a
	// node that leaves the fabric, a node that joins it.
	stop()
	stale := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kube.HyperNodes.GroupVersion().String(), "kind": "HyperNode",
		"metadata": map[string]any{"name": fabric + "-gone", "labels": map[string]any{kube.LabelManagedBy: "accelnet-kube"}},
		"spec":     map[string]any{"tier": int64(1), "members": []any{map[string]any{"type": "Node", "selector": map[string]any{"exactMatch": map[string]any{"name": "gone"}}}}},
	}}
	if _, err := c.dyn.Resource(kube.HyperNodes).Create(t.Context(), stale, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := c.node(t, "gpu-b")
	b.Annotations[kube.AnnotationHosts] = "h9-9"
	if _, err := c.core.Nodes().Update(t.Context(), b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.addNode(t, "gpu-d", map[string]string{kube.AnnotationHosts: "h1-2"})
	runKube(t, c, h, kubetest.KubeServiceAccount, "kube-2", nil, nil)
	h.Eventually(t, time.Minute, "what changed while stopped put right", func() bool {
		got := c.hyperNodes(t)
		b := c.node(t, "gpu-b")
		return got[fabric+"-gone"] == "" && got[leaf1] == "1:gpu-a,gpu-d" && b.Labels[kube.LabelLeaf] == "" &&
			strings.Contains(b.Annotations[kube.AnnotationFound], "h9-9")
	})

	// Least privilege: the service account reads no Secret.
	sa, err := corev1client.NewForConfig(c.Config(kubetest.KubeServiceAccount))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sa.Secrets("accelnet").List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("accelnet kube's service account lists Secrets: %v", err)
	}
}

// TestOneActsAtATime: of two accelnet kube replicas only the Lease's
// holder publishes; when it stops, the other takes over and publishes
// what changed since.
func TestOneActsAtATime(t *testing.T) {
	c := newCluster(t)
	h := fabrictest.New(t, fabrictest.LeafSpine(1, 2, 2))
	h.Eventually(t, 30*time.Second, "every switch in sync", func() bool { return h.Converged() == nil })
	c.addNode(t, "gpu-a", map[string]string{kube.AnnotationHosts: "h1-1"})

	var pubA, pubB atomic.Int64
	var leadA, leadB atomic.Bool
	stopA := runKube(t, c, h, kubetest.KubeServiceAccount, "kube-a", &pubA, &leadA)
	h.Eventually(t, time.Minute, "kube-a leads and publishes", func() bool { return leadA.Load() && pubA.Load() > 0 })
	runKube(t, c, h, kubetest.KubeServiceAccount, "kube-b", &pubB, &leadB)
	// kube-b stands by while kube-a renews (several resyncs of kube-a).
	seen := pubA.Load()
	h.Eventually(t, time.Minute, "kube-a publishes on while kube-b waits", func() bool { return pubA.Load() >= seen+3 })
	if leadB.Load() || pubB.Load() != 0 {
		t.Fatalf("kube-b leads (%v) or published (%d) while kube-a holds the Lease", leadB.Load(), pubB.Load())
	}
	stopA() // releases the Lease
	c.addNode(t, "gpu-b", map[string]string{kube.AnnotationHosts: "h2-1"})
	h.Eventually(t, time.Minute, "kube-b takes over and labels the new node", func() bool {
		return leadB.Load() && c.node(t, "gpu-b").Labels[kube.LabelLeaf] == "leaf2"
	})
}
