package kube

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// What accelnet kube reads and writes on Nodes.
const (
	// AnnotationHosts is set by the operator: the fabric hosts (names or
	// addresses, comma-separated) that are the node's RDMA NICs. Without
	// it a node's hosts are those whose address is one of the node's.
	AnnotationHosts = "accelnet.io/fabric-hosts"
	// AnnotationFound is what accelnet kube found: the node's hosts, or
	// why it found none.
	AnnotationFound = "accelnet.io/fabric-hosts-found"

	LabelFabric   = "accelnet.io/fabric"
	LabelBlock    = "accelnet.io/fabric-block"
	LabelLeaf     = "accelnet.io/fabric-leaf"
	LabelRail     = "accelnet.io/fabric-rail"
	LabelDegraded = "accelnet.io/fabric-degraded"
	// LabelHostname is the lowest level of the Kueue Topology.
	LabelHostname = "kubernetes.io/hostname"

	// ConditionDegraded is the node condition that says whether the
	// node's link to the fabric is degraded.
	ConditionDegraded corev1.NodeConditionType = "FabricDegraded"
	// TaintDegraded is put on a degraded node when asked to.
	TaintDegraded = "accelnet.io/fabric-degraded"
)

// ownLabels are the labels accelnet kube owns on a node.
var ownLabels = []string{LabelFabric, LabelBlock, LabelLeaf, LabelRail, LabelDegraded}

// NodePlace is what accelnet kube wants on one node.
type NodePlace struct {
	// Hosts are the node's fabric hosts, sorted; none if it is not on
	// the fabric (then Problem says why).
	Hosts   []string
	Problem string
	// Leaf is the node's tier-1 group: its leaf, or the leaves its NICs
	// attach to (a rail-optimized server); Block its tier-2 group.
	Leaf, Block string
	Rail        int
	// Degraded says why the node's link to the fabric is degraded.
	Degraded string
}

// Labels are the node's labels of accelnet kube (none off the fabric).
func (p NodePlace) Labels(fabric string) map[string]string {
	if len(p.Hosts) == 0 {
		return map[string]string{}
	}
	l := map[string]string{LabelFabric: fabric, LabelBlock: p.Block, LabelLeaf: p.Leaf}
	if p.Rail > 0 {
		l[LabelRail] = strconv.Itoa(p.Rail)
	}
	if p.Degraded != "" {
		l[LabelDegraded] = "true"
	}
	return l
}

// found is the AnnotationFound value.
func (p NodePlace) found() string {
	if len(p.Hosts) == 0 {
		return "none: " + p.Problem
	}
	return strings.Join(p.Hosts, ",")
}

// group names a set of leaves or blocks: the one, or a digest of them.
func group(prefix string, names []string) string {
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) == 1 {
		return names[0]
	}
	return labelValue(prefix + "-" + digest(strings.Join(names, ",")))
}

// hostsOf is the fabric hosts a node claims: its annotation's, else those
// whose address is one of the node's. A name or address the fabric does
// not have is a problem, never guessed.
func hostsOf(s Shape, n *corev1.Node) ([]string, string) {
	if v, ok := n.Annotations[AnnotationHosts]; ok {
		var hosts, unknown []string
		for _, f := range strings.Split(v, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			if a, err := netip.ParseAddr(f); err == nil {
				f = a.String()
				if name, ok := s.ByIP[f]; ok {
					hosts = append(hosts, name)
					continue
				}
			} else if _, ok := s.Hosts[f]; ok {
				hosts = append(hosts, f)
				continue
			}
			unknown = append(unknown, f)
		}
		if len(unknown) > 0 {
			return nil, fmt.Sprintf("%s names %s, not a host of fabric %s", AnnotationHosts, strings.Join(unknown, ", "), s.Fabric)
		}
		if len(hosts) == 0 {
			return nil, AnnotationHosts + " is empty"
		}
		slices.Sort(hosts)
		return slices.Compact(hosts), ""
	}
	var hosts []string
	for _, a := range n.Status.Addresses {
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			if name, ok := s.ByIP[ip.String()]; ok {
				hosts = append(hosts, name)
			}
		}
	}
	if len(hosts) == 0 {
		return nil, fmt.Sprintf("no address of the node is a host of fabric %s, and it has no %s annotation", s.Fabric, AnnotationHosts)
	}
	slices.Sort(hosts)
	return slices.Compact(hosts), ""
}

// Places maps every node to its place on the fabric. A host claimed by
// two nodes is a problem on both.
func Places(s Shape, nodes []*corev1.Node) map[string]NodePlace {
	out := map[string]NodePlace{}
	claimed := map[string][]string{}
	for _, n := range nodes {
		hosts, problem := hostsOf(s, n)
		out[n.Name] = NodePlace{Hosts: hosts, Problem: problem}
		for _, h := range hosts {
			claimed[h] = append(claimed[h], n.Name)
		}
	}
	for _, h := range slices.Sorted(maps.Keys(claimed)) {
		names := claimed[h]
		if len(names) < 2 {
			continue
		}
		slices.Sort(names)
		for _, name := range names {
			p := out[name]
			p.Hosts, p.Problem = nil, fmt.Sprintf("host %s is claimed by nodes %s", h, strings.Join(names, ", "))
			out[name] = p
		}
	}
	for name, p := range out {
		if len(p.Hosts) == 0 {
			continue
		}
		var leaves, blocks, degraded []string
		rails := map[int]bool{}
		for _, h := range p.Hosts {
			hp := s.Hosts[h]
			leaves = append(leaves, string(hp.Leaf))
			blocks = append(blocks, hp.Block)
			rails[hp.Rail] = true
			if hp.Degraded != "" {
				degraded = append(degraded, hp.Degraded)
			}
		}
		p.Leaf, p.Block = group("leaves", leaves), group("blocks", blocks)
		if len(rails) == 1 {
			for r := range rails {
				p.Rail = r
			}
		}
		slices.Sort(degraded)
		p.Degraded = strings.Join(slices.Compact(degraded), "; ")
		out[name] = p
	}
	return out
}
