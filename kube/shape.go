// Package kube is accelnet's Kubernetes side: it publishes the fabric's
// shape to the scheduler (node labels in the form Kueue's Topology Aware
// Scheduling reads, a Kueue Topology, Volcano HyperNodes) and keeps it
// following the live fabric. It reaches accelnet only through its REST
// API (package apiclient) and the Kubernetes API through client-go; the
// controller's core never imports it.
package kube

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/models"
)

// Shape is what the scheduler needs of the fabric: where each host is
// (its leaf, its block of leaves that share spines or a pod, its rail),
// and what is degraded. It is derived from the topology alone, so two
// views of the same fabric state give equal shapes whatever their loads.
type Shape struct {
	// Fabric is the fabric's name, fit for a label value.
	Fabric string
	// Hosts are the fabric's hosts by name.
	Hosts map[string]HostPlace
	// ByIP finds a host's name by its address.
	ByIP map[string]string
	// Blocks are the blocks by name, with the state of their uplinks.
	Blocks map[string]BlockState
	// Leaves are the leaves by name.
	Leaves map[models.SwitchID]LeafState
}

// HostPlace is where a host is, and why its link to the fabric is
// degraded ("" if it is not).
type HostPlace struct {
	Leaf     models.SwitchID
	Block    string
	Rail     int
	Degraded string
}

// LeafState is a leaf's block and its uplinks: how many are declared and
// how many carry routes (up, not drained, not dampened, not miswired or
// lost). Degraded says why the leaf cannot serve its hosts ("" if it can).
type LeafState struct {
	Block         string
	Uplinks, Up   int
	Degraded      string
	DrainedOrDown bool
}

// BlockState is a block's leaves and how many of its uplinks carry
// routes (its leaves' and, for a pod, its spines' to the core); Degraded
// says what it has lost ("" if nothing).
type BlockState struct {
	Leaves      []models.SwitchID
	Uplinks, Up int
	Degraded    string
}

// notInLabel is what a label value cannot hold.
var notInLabel = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// labelValue is s made a valid label value: at most 63 characters of
// [A-Za-z0-9-_.], starting and ending with one of [A-Za-z0-9].
func labelValue(s string) string {
	s = notInLabel.ReplaceAllString(s, "-")
	if len(s) > 63 {
		s = s[:54] + "-" + digest(s)
	}
	return strings.Trim(s, "-_.")
}

// digest is a short, stable digest of s (8 hex digits).
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}

// usable says whether a link carries routes.
func usable(l api.LinkView) bool {
	if !l.Load.Up || l.Drained || l.Dampened {
		return false
	}
	if d := l.Discovery; d != nil {
		switch d.State {
		case api.DiscoveryMiswired, api.DiscoveryLost, api.DiscoveryDown:
			return false
		}
	}
	return true
}

// ShapeOf derives the shape from a topology view.
func ShapeOf(v api.TopologyView) Shape {
	s := Shape{Fabric: labelValue(cmp.Or(v.Name, "fabric")), Hosts: map[string]HostPlace{}, ByIP: map[string]string{},
		Blocks: map[string]BlockState{}, Leaves: map[models.SwitchID]LeafState{}}
	role := map[models.SwitchID]models.Role{}
	sws := map[models.SwitchID]api.SwitchView{}
	for _, sw := range v.Switches {
		role[sw.Name] = sw.Role
		sws[sw.Name] = sw
	}
	s.Leaves = leavesOf(v, role, sws)
	// Name the spine blocks by their first leaf, or "spines" if only one.
	first := map[string]models.SwitchID{}
	for _, name := range slices.Sorted(maps.Keys(s.Leaves)) {
		if b := s.Leaves[name].Block; first[b] == "" {
			first[b] = name
		}
	}
	spineBlocks := 0
	for b := range first {
		if strings.HasPrefix(b, "spines:") {
			spineBlocks++
		}
	}
	for name, ls := range s.Leaves {
		if strings.HasPrefix(ls.Block, "spines:") {
			ls.Block = "spines"
			if spineBlocks > 1 {
				ls.Block = "spines-" + string(first[s.Leaves[name].Block])
			}
			ls.Block = labelValue(ls.Block)
		}
		sw := sws[name]
		switch {
		case sw.Drained:
			ls.Degraded, ls.DrainedOrDown = fmt.Sprintf("leaf %s is drained", name), true
		case ls.Uplinks > 0 && ls.Up == 0:
			ls.Degraded, ls.DrainedOrDown = fmt.Sprintf("leaf %s has no working uplink (0 of %d)", name, ls.Uplinks), true
		}
		s.Leaves[name] = ls
		b := s.Blocks[ls.Block]
		b.Leaves = append(b.Leaves, name)
		b.Uplinks += ls.Uplinks
		b.Up += ls.Up
		s.Blocks[ls.Block] = b
	}
	s.addPodUplinks(v, role, sws)
	for name, b := range s.Blocks {
		slices.Sort(b.Leaves)
		if b.Up < b.Uplinks {
			b.Degraded = fmt.Sprintf("%d of %d uplinks carry routes", b.Up, b.Uplinks)
		}
		s.Blocks[name] = b
	}
	for _, h := range v.Hosts {
		ls := s.Leaves[h.Attach.Switch]
		hp := HostPlace{Leaf: h.Attach.Switch, Block: ls.Block, Rail: h.Rail, Degraded: ls.Degraded}
		if h.PortDown {
			hp.Degraded = fmt.Sprintf("the link of host %s to %s is down", h.Name, h.Attach)
		}
		s.Hosts[h.Name] = hp
		if h.IP.IsValid() {
			s.ByIP[h.IP.String()] = h.Name
		}
	}
	return s
}

// leavesOf is each leaf's block (a fat-tree's pod, or the spines its
// uplinks reach, named later) and its uplinks: all, and those usable.
func leavesOf(v api.TopologyView, role map[models.SwitchID]models.Role, sws map[models.SwitchID]api.SwitchView) map[models.SwitchID]LeafState {
	leaves := map[models.SwitchID]LeafState{}
	// A leaf's uplinks, and the switches they reach.
	type uplinks struct {
		to        []string
		total, up int
	}
	ups := map[models.SwitchID]*uplinks{}
	for _, sw := range v.Switches {
		if sw.Role == models.RoleLeaf {
			ups[sw.Name] = &uplinks{}
		}
	}
	for _, l := range v.Links {
		for _, e := range [][2]models.Endpoint{{l.A, l.B}, {l.B, l.A}} {
			u := ups[e[0].Switch]
			if u == nil || role[e[1].Switch] == models.RoleLeaf {
				continue
			}
			u.to = append(u.to, string(e[1].Switch))
			u.total++
			if usable(l) && !sws[e[1].Switch].Drained {
				u.up++
			}
		}
	}
	// Blocks: a fat-tree's pods; else leaves that reach the same spines.
	for name, u := range ups {
		slices.Sort(u.to)
		u.to = slices.Compact(u.to)
		block := ""
		if p := sws[name].Pod; p > 0 {
			block = "pod" + strconv.Itoa(p)
		} else {
			block = "spines:" + strings.Join(u.to, ",")
		}
		leaves[name] = LeafState{Block: block, Uplinks: u.total, Up: u.up}
	}
	return leaves
}

// addPodUplinks counts a pod's way out: its spines' links to the core.
func (s Shape) addPodUplinks(v api.TopologyView, role map[models.SwitchID]models.Role, sws map[models.SwitchID]api.SwitchView) {
	for _, l := range v.Links {
		for _, e := range [][2]models.Endpoint{{l.A, l.B}, {l.B, l.A}} {
			sw := sws[e[0].Switch]
			if sw.Role != models.RoleSpine || sw.Pod == 0 || role[e[1].Switch] != models.RoleCore {
				continue
			}
			b := s.Blocks["pod"+strconv.Itoa(sw.Pod)]
			b.Uplinks++
			if usable(l) && !sws[e[1].Switch].Drained && !sw.Drained {
				b.Up++
			}
			s.Blocks["pod"+strconv.Itoa(sw.Pod)] = b
		}
	}
}

// Equal says whether two shapes are the same.
func (s Shape) Equal(o Shape) bool {
	return s.Fabric == o.Fabric && maps.Equal(s.Hosts, o.Hosts) && maps.Equal(s.ByIP, o.ByIP) &&
		maps.EqualFunc(s.Blocks, o.Blocks, func(a, b BlockState) bool {
			return slices.Equal(a.Leaves, b.Leaves) && a.Uplinks == b.Uplinks && a.Up == b.Up && a.Degraded == b.Degraded
		}) && maps.Equal(s.Leaves, o.Leaves)
}
