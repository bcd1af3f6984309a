package kube_test

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/kubetest"
	"github.com/accelnet/accelnet/kube"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// BenchmarkFollowDrain: a k=16 fat-tree (1,024 hosts, one node each) is
// published; each iteration drains a leaf and measures how long until its
// 8 nodes carry accelnet.io/fabric-degraded=true and its HyperNode is
// gone (drain), then undrains it and measures how long until they are
// back (restore). accelnet's topology stream sends every second, so most
// of either is waiting for the stream's next event.
//
//	go test ./kube -run '^$' -bench FollowDrain -benchtime 10x
func BenchmarkFollowDrain(b *testing.B) {
	topo, err := topology.FatTree(16, 100)
	if err != nil {
		b.Fatal(err)
	}
	h := fabrictest.New(b, topo)
	h.Eventually(b, 5*time.Minute, "every switch in sync", func() bool { return h.Converged() == nil })
	ks := kubetest.Start(b)
	ks.InstallCRDs(b, "testdata/crds/topology.volcano.sh_hypernodes.yaml", "testdata/crds/kueue.x-k8s.io_topologies.yaml")
	ks.Apply(b, "../deploy/k8s/namespace.yaml")
	c := adminClients(b, ks)
	// One node per host, made 32 at a time.
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for _, host := range topo.Hosts {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_, err := c.core.Nodes().Create(b.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + host.Name,
				Annotations: map[string]string{kube.AnnotationHosts: host.Name}}}, metav1.CreateOptions{})
			if err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	runKube(b, c, h, kubetest.Admin, "kube-bench", nil, nil)
	fabric := kube.ShapeOf(api.TopologyView{Name: topo.Name}).Fabric
	h.Eventually(b, 5*time.Minute, "the fabric published", func() bool {
		_, err := c.dyn.Resource(kube.HyperNodes).Get(b.Context(), kube.HyperNodeName(fabric, ""), metav1.GetOptions{})
		return err == nil && c.countNodes(b, kube.LabelFabric+"="+fabric) == len(topo.Hosts)
	})

	var leaves []models.SwitchID
	for _, sw := range topo.Switches {
		if sw.Role == models.RoleLeaf {
			leaves = append(leaves, sw.Name)
		}
	}
	var drain, restore []time.Duration
	b.ResetTimer()
	for i := range b.N {
		leaf := leaves[(i*37)%len(leaves)]
		degraded := fmt.Sprintf("%s=%s,%s=true", kube.LabelLeaf, leaf, kube.LabelDegraded)
		hn := kube.HyperNodeName(fabric, string(leaf))
		start := time.Now()
		var d models.Drain
		if r := h.Do(b, "POST", "/api/v1/drains", h.OperatorToken, models.Drain{Switch: leaf, Force: true}, &d); r.StatusCode != http.StatusCreated {
			b.Fatalf("drain %s: HTTP %d", leaf, r.StatusCode)
		}
		waitFor(b, "leaf "+string(leaf)+"'s nodes degraded, its HyperNode gone", func() bool {
			_, err := c.dyn.Resource(kube.HyperNodes).Get(b.Context(), hn, metav1.GetOptions{})
			return apierrors.IsNotFound(err) && c.countNodes(b, degraded) == 8
		})
		drain = append(drain, time.Since(start))
		start = time.Now()
		if r := h.Do(b, "DELETE", "/api/v1/drains/"+d.ID, h.OperatorToken, nil, nil); r.StatusCode >= 300 {
			b.Fatalf("undrain %s: HTTP %d", leaf, r.StatusCode)
		}
		waitFor(b, "leaf "+string(leaf)+"'s nodes restored", func() bool {
			_, err := c.dyn.Resource(kube.HyperNodes).Get(b.Context(), hn, metav1.GetOptions{})
			return err == nil && c.countNodes(b, degraded) == 0
		})
		restore = append(restore, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(drain)
	slices.Sort(restore)
	b.ReportMetric(float64(drain[len(drain)/2].Milliseconds()), "drain_p50_ms")
	b.ReportMetric(float64(drain[len(drain)-1].Milliseconds()), "drain_max_ms")
	b.ReportMetric(float64(restore[len(restore)/2].Milliseconds()), "restore_p50_ms")
	b.ReportMetric(float64(restore[len(restore)-1].Milliseconds()), "restore_max_ms")
	b.ReportMetric(float64(len(topo.Hosts)), "nodes")
}

// countNodes counts the nodes with the labels of selector.
func (c *cluster) countNodes(t testing.TB, selector string) int {
	t.Helper()
	list, err := c.core.Nodes().List(t.Context(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

// waitFor polls cond every 10 ms, with a backstop of two minutes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	backstop := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(backstop) {
			t.Fatalf("after two minutes: not %s", what)
		}
		<-time.After(10 * time.Millisecond)
	}
}
