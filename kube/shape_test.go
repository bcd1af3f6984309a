package kube

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// viewOf is the topology view of t with every link up.
func viewOf(t *testing.T, topo models.Topology, err error) api.TopologyView {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	v := api.TopologyView{Name: topo.Name}
	for _, sw := range topo.Switches {
		v.Switches = append(v.Switches, api.SwitchView{Switch: sw})
	}
	for _, l := range topo.Links {
		v.Links = append(v.Links, api.LinkView{ID: l.ID(), A: l.A, B: l.B, Gbps: l.Gbps, Load: api.LinkLoad{Up: true, Measured: true}})
	}
	for _, h := range topo.Hosts {
		v.Hosts = append(v.Hosts, api.HostView{Host: h})
	}
	return v
}

func node(name string, annotations map[string]string, addrs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
	for _, a := range addrs {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
	}
	return n
}

// TestShapeOfAFatTree: a fat-tree's blocks are its pods; every leaf has
// its two uplinks, every pod its leaves' and its spines' to the core.
func TestShapeOfAFatTree(t *testing.T) {
	topo, err := topology.FatTree(4, 100)
	s := ShapeOf(viewOf(t, topo, err))
	if s.Fabric != "fattree-k4" && !strings.HasPrefix(s.Fabric, "fattree") {
		t.Errorf("fabric %q", s.Fabric)
	}
	if len(s.Blocks) != 4 {
		t.Fatalf("%d blocks, want the 4 pods: %v", len(s.Blocks), s.Blocks)
	}
	b := s.Blocks["pod2"]
	if !slices.Equal(b.Leaves, []models.SwitchID{"p2-leaf1", "p2-leaf2"}) || b.Uplinks != 8 || b.Up != 8 || b.Degraded != "" {
		t.Errorf("pod2: %+v, want its 2 leaves, 4 leaf uplinks and 4 to the core, all up", b)
	}
	h := s.Hosts["h1-2-1"]
	if h.Leaf != "p1-leaf2" || h.Block != "pod1" || h.Degraded != "" {
		t.Errorf("h1-2-1: %+v", h)
	}
	if s.ByIP["10.0.3.1"] != "h1-2-1" {
		t.Errorf("10.0.3.1 is %q", s.ByIP["10.0.3.1"])
	}
}

// TestShapeOfALeafSpine: the leaves of a leaf-spine share their spines:
// one block.
func TestShapeOfALeafSpine(t *testing.T) {
	topo, err := topology.LeafSpine(2, 3, 2, 100)
	s := ShapeOf(viewOf(t, topo, err))
	if len(s.Blocks) != 1 || len(s.Blocks["spines"].Leaves) != 3 {
		t.Fatalf("blocks %v, want one of the 3 leaves", s.Blocks)
	}
	if s.Hosts["h3-2"].Block != "spines" || s.Hosts["h3-2"].Leaf != "leaf3" {
		t.Errorf("h3-2: %+v", s.Hosts["h3-2"])
	}
}

// TestShapeFollowsTheFabric: a drained leaf, a leaf cut off from every
// spine and a NIC whose link is down degrade their hosts; one lost uplink
// only says so on the block; loads alone change nothing.
func TestShapeFollowsTheFabric(t *testing.T) {
	topo, err := topology.LeafSpine(2, 3, 2, 100)
	v := viewOf(t, topo, err)
	s0 := ShapeOf(v)

	loaded := viewOf(t, topo, err)
	for i := range loaded.Links {
		loaded.Links[i].Load.ABbps, loaded.Links[i].Load.Utilization = 7e10, 0.7
	}
	if !ShapeOf(loaded).Equal(s0) {
		t.Error("a change of load changed the shape")
	}

	// One uplink of leaf1 down: the block says so, no host is degraded.
	down := viewOf(t, topo, err)
	for i, l := range down.Links {
		if l.A.Switch == "leaf1" && l.B.Switch == "spine1" || l.B.Switch == "leaf1" && l.A.Switch == "spine1" {
			down.Links[i].Load.Up = false
		}
	}
	s1 := ShapeOf(down)
	if s1.Equal(s0) || s1.Blocks["spines"].Up != 5 || s1.Blocks["spines"].Degraded == "" || s1.Hosts["h1-1"].Degraded != "" {
		t.Errorf("one uplink down: block %+v, h1-1 %+v", s1.Blocks["spines"], s1.Hosts["h1-1"])
	}
	// Both: leaf1's hosts are cut off.
	for i, l := range down.Links {
		if l.A.Switch == "leaf1" || l.B.Switch == "leaf1" {
			down.Links[i].Load.Up = false
		}
	}
	if d := ShapeOf(down).Hosts["h1-2"].Degraded; !strings.Contains(d, "no working uplink") {
		t.Errorf("leaf1 cut off: h1-2 degraded %q", d)
	}
	// A drained leaf, a drained spine.
	drained := viewOf(t, topo, err)
	for i := range drained.Switches {
		if drained.Switches[i].Name == "leaf2" || drained.Switches[i].Name == "spine2" {
			drained.Switches[i].Drained = true
		}
	}
	s2 := ShapeOf(drained)
	if !strings.Contains(s2.Hosts["h2-1"].Degraded, "drained") || s2.Hosts["h1-1"].Degraded != "" || s2.Blocks["spines"].Up != 3 {
		t.Errorf("leaf2 and spine2 drained: h2-1 %+v, h1-1 %+v, block %+v", s2.Hosts["h2-1"], s2.Hosts["h1-1"], s2.Blocks["spines"])
	}
	// A NIC's link down.
	nic := viewOf(t, topo, err)
	nic.Hosts[0].PortDown = true
	if d := ShapeOf(nic).Hosts[nic.Hosts[0].Name].Degraded; !strings.Contains(d, "is down") {
		t.Errorf("a NIC's link down: %q", d)
	}
}

// TestPlaces: nodes are mapped by address or by annotation; what cannot
// be mapped is a problem, never a guess; a rail-optimized server's
// leaves are one group.
func TestPlaces(t *testing.T) {
	topo, err := topology.LeafSpine(2, 2, 2, 100)
	s := ShapeOf(viewOf(t, topo, err))
	places := Places(s, []*corev1.Node{
		node("by-address", nil, "192.168.0.9", "10.0.1.1"),
		node("by-name", map[string]string{AnnotationHosts: "h1-2, 10.0.2.1"}),
		node("unknown-host", map[string]string{AnnotationHosts: "h1-2x"}),
		node("nowhere", nil, "192.168.0.10"),
		node("twin-a", nil, "10.0.2.2"),
		node("twin-b", map[string]string{AnnotationHosts: "h2-2"}),
	})
	if p := places["by-address"]; !slices.Equal(p.Hosts, []string{"h1-1"}) || p.Leaf != "leaf1" || p.Block != "spines" {
		t.Errorf("by-address: %+v", p)
	}
	// Two NICs on two leaves: a group of both.
	if p := places["by-name"]; !slices.Equal(p.Hosts, []string{"h1-2", "h2-1"}) || !strings.HasPrefix(p.Leaf, "leaves-") || p.Block != "spines" {
		t.Errorf("by-name: %+v", p)
	}
	if p := places["unknown-host"]; len(p.Hosts) != 0 || !strings.Contains(p.Problem, "h1-2x") {
		t.Errorf("unknown-host: %+v", p)
	}
	if p := places["nowhere"]; len(p.Hosts) != 0 || !strings.Contains(p.Problem, "no address") {
		t.Errorf("nowhere: %+v", p)
	}
	for _, n := range []string{"twin-a", "twin-b"} {
		if p := places[n]; len(p.Hosts) != 0 || !strings.Contains(p.Problem, "claimed by nodes twin-a, twin-b") {
			t.Errorf("%s: %+v", n, p)
		}
	}
	if l := places["by-address"].Labels(s.Fabric); l[LabelLeaf] != "leaf1" || l[LabelBlock] != "spines" || l[LabelFabric] != s.Fabric || l[LabelDegraded] != "" {
		t.Errorf("labels %v", l)
	}
	if l := places["nowhere"].Labels(s.Fabric); len(l) != 0 {
		t.Errorf("a node off the fabric gets labels %v", l)
	}

	rail, err := topology.RailOptimized(4, 2, 2, 100)
	rs := ShapeOf(viewOf(t, rail, err))
	rp := Places(rs, []*corev1.Node{
		node("server1", map[string]string{AnnotationHosts: "s1-g1,s1-g2"}),
		node("server2", map[string]string{AnnotationHosts: "s2-g1,s2-g2"}),
		node("gpu", map[string]string{AnnotationHosts: "s3-g2"}),
	})
	if rp["server1"].Leaf != rp["server2"].Leaf || rp["server1"].Rail != 0 {
		t.Errorf("servers on the same rail leaves: %+v, %+v", rp["server1"], rp["server2"])
	}
	if rp["gpu"].Leaf != "rail2" || rp["gpu"].Rail != 2 || rp["gpu"].Labels(rs.Fabric)[LabelRail] != "2" {
		t.Errorf("one GPU's node: %+v", rp["gpu"])
	}
}

// TestWantedHyperNodes: a tier-1 HyperNode per leaf group with nodes
// that are not degraded, a tier-2 per block of those, one tier-3; a
// degraded node is in none.
func TestWantedHyperNodes(t *testing.T) {
	topo, err := topology.FatTree(4, 100)
	v := viewOf(t, topo, err)
	for i := range v.Switches {
		if v.Switches[i].Name == "p2-leaf1" {
			v.Switches[i].Drained = true
		}
	}
	s := ShapeOf(v)
	places := Places(s, []*corev1.Node{
		node("n1", nil, "10.0.2.1"),                              // h1-1-1 on p1-leaf1
		node("n2", nil, "10.0.2.2"),                              // h1-1-2 on p1-leaf1
		node("n3", nil, "10.0.3.1"),                              // h1-2-1 on p1-leaf2
		node("n4", map[string]string{AnnotationHosts: "h2-1-1"}), // on the drained p2-leaf1
		node("n5", map[string]string{AnnotationHosts: "h3-1-1"}),
	})
	want := wantedHyperNodes(s, places)
	names := func(tier int) []string {
		var out []string
		for n, h := range want {
			if h.tier == tier {
				out = append(out, n)
			}
		}
		slices.Sort(out)
		return out
	}
	f := s.Fabric
	if got := names(TierLeaf); !slices.Equal(got, []string{f + "-p1-leaf1", f + "-p1-leaf2", f + "-p3-leaf1"}) {
		t.Errorf("tier 1: %v", got)
	}
	if got := want[f+"-p1-leaf1"].members; !slices.Equal(got, []string{"n1", "n2"}) {
		t.Errorf("p1-leaf1's members: %v", got)
	}
	if got := names(TierBlock); !slices.Equal(got, []string{f + "-pod1", f + "-pod3"}) {
		t.Errorf("tier 2 (pod2's only node is degraded): %v", got)
	}
	if got := want[f+"-pod1"].members; !slices.Equal(got, []string{f + "-p1-leaf1", f + "-p1-leaf2"}) || want[f+"-pod1"].memberType != "HyperNode" {
		t.Errorf("pod1: %+v", want[f+"-pod1"])
	}
	if got := want[f]; got.tier != TierFabric || !slices.Equal(got.members, []string{f + "-pod1", f + "-pod3"}) {
		t.Errorf("the fabric: %+v", got)
	}
	if got := want[f+"-pod1"].annotations[AnnotationUplinks]; got != "8/8" {
		t.Errorf("pod1 uplinks %q", got)
	}
	if !strings.Contains(places["n4"].Degraded, "drained") || places["n4"].Labels(f)[LabelDegraded] != "true" {
		t.Errorf("n4: %+v", places["n4"])
	}
}
