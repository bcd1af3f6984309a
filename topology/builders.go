package topology

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/accelnet/accelnet/models"
)

// leafPrefix is the /24 of the n-th leaf (1-based): 10.<n/256>.<n%256>.0/24.
func leafPrefix(n int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(n >> 8), byte(n), 0}), 24)
}

func hostAddr(leaf netip.Prefix, n int) netip.Addr {
	a := leaf.Addr().As4()
	a[3] = byte(n)
	return netip.AddrFrom4(a)
}

// portLimit keeps generated port numbers below the CPU port.
const portLimit = models.CPUPort - 1

// LeafSpine builds a two-tier Clos: every leaf connects to every spine with
// one link of gbps; hostsPerLeaf hosts (NICs of gbps) hang off each leaf.
// Leaf n has hosts on ports 1..hostsPerLeaf and spine s on port
// hostsPerLeaf+s; spine s has leaf n on port n. Leaf n's hosts are in
// 10.<n/256>.<n%256>.0/24.
func LeafSpine(spines, leaves, hostsPerLeaf int, gbps float64) (models.Topology, error) {
	switch {
	case spines < 1 || leaves < 1 || hostsPerLeaf < 0:
		return models.Topology{}, fmt.Errorf("%w: leaf-spine needs at least 1 spine and 1 leaf", models.ErrInvalid)
	case hostsPerLeaf+spines > portLimit:
		return models.Topology{}, fmt.Errorf("%w: leaf-spine: %d hosts + %d spines exceed %d leaf ports", models.ErrInvalid, hostsPerLeaf, spines, portLimit)
	case leaves > portLimit:
		return models.Topology{}, fmt.Errorf("%w: leaf-spine: %d leaves exceed %d spine ports", models.ErrInvalid, leaves, portLimit)
	case hostsPerLeaf > 254:
		return models.Topology{}, fmt.Errorf("%w: leaf-spine: at most 254 hosts per leaf (one /24)", models.ErrInvalid)
	case !(gbps > 0):
		return models.Topology{}, fmt.Errorf("%w: leaf-spine: gbps must be positive", models.ErrInvalid)
	}
	// Named as its spec is written (leafspine:LEAVESxHOSTSxSPINES).
	t := models.Topology{Name: fmt.Sprintf("leafspine-%dx%dx%d", leaves, hostsPerLeaf, spines)}
	dev := uint64(0)
	for s := 1; s <= spines; s++ {
		dev++
		t.Switches = append(t.Switches, models.Switch{Name: models.SwitchID(fmt.Sprintf("spine%d", s)), Role: models.RoleSpine, DeviceID: dev})
	}
	for l := 1; l <= leaves; l++ {
		dev++
		leaf := models.SwitchID(fmt.Sprintf("leaf%d", l))
		prefix := leafPrefix(l)
		t.Switches = append(t.Switches, models.Switch{Name: leaf, Role: models.RoleLeaf, DeviceID: dev, Prefix: prefix})
		for h := 1; h <= hostsPerLeaf; h++ {
			t.Hosts = append(t.Hosts, models.Host{
				Name:    fmt.Sprintf("h%d-%d", l, h),
				IP:      hostAddr(prefix, h),
				Attach:  models.Endpoint{Switch: leaf, Port: uint32(h)},
				NICGbps: gbps,
			})
		}
		for s := 1; s <= spines; s++ {
			t.Links = append(t.Links, models.Link{
				A:    models.Endpoint{Switch: leaf, Port: uint32(hostsPerLeaf + s)},
				B:    models.Endpoint{Switch: models.SwitchID(fmt.Sprintf("spine%d", s)), Port: uint32(l)},
				Gbps: gbps,
			})
		}
	}
	return t, t.Validate()
}

// FatTree builds the k-ary fat-tree of Al-Fares et al.: k pods of k/2 leaves
// (edge switches) and k/2 spines (aggregation switches), (k/2)² core
// switches, k/2 hosts per leaf, every link gbps. In pod p, leaf e has hosts
// on ports 1..k/2 and spine a on port k/2+a+1; spine a has leaf e on port
// e+1 and core a·k/2+j on port k/2+j+1; core c has pod p on port p+1.
//
// Addresses are handed out per pod in aligned blocks: with s the smallest
// power of two ≥ k/2, leaf e of pod P (both counted from 1) has the /24
// of leaf number P·s+e-1 (10.<n/256>.<n%256>.0/24), so pod P's leaves
// fill the block of s /24s from P·s (k=16: pod 1 is 10.0.8.0/21). Routes
// toward a pod then aggregate to one entry per switch outside it (two
// when k/2 is not a power of two; see pathcalc.Aggregate).
func FatTree(k int, gbps float64) (models.Topology, error) {
	switch {
	case k < 2 || k%2 != 0:
		return models.Topology{}, fmt.Errorf("%w: fat-tree: k must be even and at least 2, got %d", models.ErrInvalid, k)
	case k > portLimit:
		return models.Topology{}, fmt.Errorf("%w: fat-tree: k=%d exceeds %d ports", models.ErrInvalid, k, portLimit)
	case !(gbps > 0):
		return models.Topology{}, fmt.Errorf("%w: fat-tree: gbps must be positive", models.ErrInvalid)
	}
	half := k / 2
	stride := 1
	for stride < half {
		stride *= 2
	}
	t := models.Topology{Name: fmt.Sprintf("fattree-%d", k)}
	dev := uint64(0)
	core := func(c int) models.SwitchID { return models.SwitchID(fmt.Sprintf("core%d", c+1)) }
	agg := func(p, a int) models.SwitchID { return models.SwitchID(fmt.Sprintf("p%d-spine%d", p+1, a+1)) }
	edge := func(p, e int) models.SwitchID { return models.SwitchID(fmt.Sprintf("p%d-leaf%d", p+1, e+1)) }
	for c := 0; c < half*half; c++ {
		dev++
		t.Switches = append(t.Switches, models.Switch{Name: core(c), Role: models.RoleCore, DeviceID: dev})
	}
	for p := 0; p < k; p++ {
		for a := 0; a < half; a++ {
			dev++
			t.Switches = append(t.Switches, models.Switch{Name: agg(p, a), Role: models.RoleSpine, DeviceID: dev, Pod: p + 1})
			for j := 0; j < half; j++ {
				t.Links = append(t.Links, models.Link{
					A:    models.Endpoint{Switch: agg(p, a), Port: uint32(half + j + 1)},
					B:    models.Endpoint{Switch: core(a*half + j), Port: uint32(p + 1)},
					Gbps: gbps,
				})
			}
		}
		for e := 0; e < half; e++ {
			dev++
			n := (p+1)*stride + e
			prefix := leafPrefix(n)
			t.Switches = append(t.Switches, models.Switch{Name: edge(p, e), Role: models.RoleLeaf, DeviceID: dev, Prefix: prefix, Pod: p + 1})
			for h := 0; h < half; h++ {
				t.Hosts = append(t.Hosts, models.Host{
					Name:    fmt.Sprintf("h%d-%d-%d", p+1, e+1, h+1),
					IP:      hostAddr(prefix, h+1),
					Attach:  models.Endpoint{Switch: edge(p, e), Port: uint32(h + 1)},
					NICGbps: gbps,
				})
			}
			for a := 0; a < half; a++ {
				t.Links = append(t.Links, models.Link{
					A:    models.Endpoint{Switch: edge(p, e), Port: uint32(half + a + 1)},
					B:    models.Endpoint{Switch: agg(p, a), Port: uint32(e + 1)},
					Gbps: gbps,
				})
			}
		}
	}
	return t, t.Validate()
}

// RailOptimized builds a rail-optimized two-tier fabric: servers with rails
// GPUs each; GPU r of every server attaches to rail leaf r (port = server
// number), and every rail leaf connects to every spine. Host s<S>-g<R> has
// Rail R. Leaf r's hosts are in leaf r's /24.
func RailOptimized(servers, rails, spines int, gbps float64) (models.Topology, error) {
	t, err := LeafSpine(spines, rails, servers, gbps)
	if err != nil {
		return t, err
	}
	t.Name = fmt.Sprintf("rail-%dx%dx%d", servers, rails, spines)
	for i := range t.Switches {
		if t.Switches[i].Role == models.RoleLeaf {
			t.Switches[i].Name = models.SwitchID(strings.Replace(string(t.Switches[i].Name), "leaf", "rail", 1))
		}
	}
	rename := func(e *models.Endpoint) {
		e.Switch = models.SwitchID(strings.Replace(string(e.Switch), "leaf", "rail", 1))
	}
	for i := range t.Links {
		rename(&t.Links[i].A)
	}
	for i := range t.Hosts {
		h := &t.Hosts[i]
		rail, _ := strconv.Atoi(strings.TrimPrefix(string(h.Attach.Switch), "leaf"))
		h.Name = fmt.Sprintf("s%d-g%d", h.Attach.Port, rail)
		h.Rail = rail
		rename(&h.Attach)
	}
	return t, t.Validate()
}
