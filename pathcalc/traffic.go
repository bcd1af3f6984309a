package pathcalc

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// Traffic patterns.
const (
	PatternPermutation = "permutation"    // every host sends to a distinct host on another leaf
	PatternStride      = "stride"         // host i sends to host i+stride (in fabric order)
	PatternRing        = "ring-allreduce" // one ring per rail (the hosts at the same position on every leaf)
	PatternAllToAll    = "all-to-all"     // every host to every other host
	PatternIncast      = "incast"         // n senders to one receiver
	PatternMultiTenant = "multi-tenant"   // hosts split into tenants of random sizes, each running a ring or an all-to-all
	// Kind of a collective made of independent transfers.
	KindPointToPoint = "point-to-point"
)

// Patterns lists every traffic pattern.
var Patterns = []string{PatternPermutation, PatternStride, PatternRing, PatternAllToAll, PatternIncast, PatternMultiTenant}

// TrafficSpec selects a traffic pattern.
type TrafficSpec struct {
	Pattern       string
	Seed          uint64
	Stride        int // stride: default hosts per leaf
	IncastSenders int // incast: default 8
	Tenants       int // multi-tenant: default 4
}

// Connection is one sender→receiver pair.
type Connection struct {
	Src, Dst models.Host
}

// Collective groups connections whose completion counts together: a ring
// all-reduce, an all-to-all, or independent point-to-point transfers.
type Collective struct {
	Kind  string
	Ranks int
	Conns []Connection
}

// Traffic generates a pattern's connections on a fabric.
func Traffic(snap *topology.Snapshot, spec TrafficSpec) ([]Collective, error) {
	hosts := snap.Hosts()
	if len(hosts) < 2 {
		return nil, fmt.Errorf("%w: the fabric has fewer than two hosts", models.ErrInvalid)
	}
	var leaves []models.SwitchID
	for _, sw := range snap.Switches() {
		if sw.Role == models.RoleLeaf {
			leaves = append(leaves, sw.Name)
		}
	}
	rng := rand.New(rand.NewPCG(spec.Seed, spec.Seed^0x9e3779b97f4a7c15))
	switch spec.Pattern {
	case PatternPermutation:
		perm := derangementAcrossLeaves(hosts, rng)
		var pairs [][2]models.Host
		for i, j := range perm {
			if j >= 0 {
				pairs = append(pairs, [2]models.Host{hosts[i], hosts[j]})
			}
		}
		return p2pOf(pairs), nil
	case PatternStride:
		stride := spec.Stride
		if stride == 0 {
			stride = len(snap.HostsOn(hosts[0].Attach.Switch))
		}
		if stride%len(hosts) == 0 {
			return nil, fmt.Errorf("%w: stride %d maps every host to itself", models.ErrInvalid, stride)
		}
		var pairs [][2]models.Host
		for i := range hosts {
			pairs = append(pairs, [2]models.Host{hosts[i], hosts[(i+stride)%len(hosts)]})
		}
		return p2pOf(pairs), nil
	case PatternRing:
		var out []Collective
		for _, rail := range hostsByRail(hosts, leaves) {
			if len(rail) >= 2 {
				out = append(out, ringOf(rail))
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%w: no rail has two hosts", models.ErrInvalid)
		}
		return out, nil
	case PatternAllToAll:
		return []Collective{allToAllOf(hosts)}, nil
	case PatternIncast:
		n := spec.IncastSenders
		if n == 0 {
			n = 8
		}
		if n >= len(hosts) {
			return nil, fmt.Errorf("%w: incast of %d senders needs more than %d hosts", models.ErrInvalid, n, len(hosts))
		}
		order := rng.Perm(len(hosts))
		dst := hosts[order[0]]
		var pairs [][2]models.Host
		for _, i := range order[1 : n+1] {
			pairs = append(pairs, [2]models.Host{hosts[i], dst})
		}
		return p2pOf(pairs), nil
	case PatternMultiTenant:
		return multiTenant(hosts, spec.Tenants, rng)
	}
	return nil, fmt.Errorf("%w: pattern %q", models.ErrInvalid, spec.Pattern)
}

// hostsByRail returns the hosts of each rail: by their Rail in a
// rail-optimized fabric; otherwise rail r is the r-th host (in port order)
// of every leaf, leaves in fabric order.
func hostsByRail(hosts []models.Host, leaves []models.SwitchID) [][]models.Host {
	if slices.ContainsFunc(hosts, func(h models.Host) bool { return h.Rail > 0 }) {
		var rails [][]models.Host
		for _, h := range hosts {
			for len(rails) < h.Rail {
				rails = append(rails, nil)
			}
			if h.Rail > 0 {
				rails[h.Rail-1] = append(rails[h.Rail-1], h)
			}
		}
		return rails
	}
	onLeaf := map[models.SwitchID][]models.Host{}
	for _, h := range hosts {
		onLeaf[h.Attach.Switch] = append(onLeaf[h.Attach.Switch], h)
	}
	var rails [][]models.Host
	for _, leaf := range leaves {
		hs := onLeaf[leaf]
		slices.SortFunc(hs, func(a, b models.Host) int { return cmp.Compare(a.Attach.Port, b.Attach.Port) })
		for i, h := range hs {
			for len(rails) <= i {
				rails = append(rails, nil)
			}
			rails[i] = append(rails[i], h)
		}
	}
	return rails
}

// plan turns a spec into connections, grouped into collectives.
// derangementAcrossLeaves maps each host index to a distinct host on another
// leaf (-1 where none could be found, on tiny fabrics).
func derangementAcrossLeaves(hosts []models.Host, rng *rand.Rand) []int {
	perm := rng.Perm(len(hosts))
	for i := range perm {
		for tries := 0; hosts[i].Attach.Switch == hosts[perm[i]].Attach.Switch && tries < 4*len(hosts); tries++ {
			j := rng.IntN(len(hosts))
			if hosts[j].Attach.Switch != hosts[perm[i]].Attach.Switch && hosts[i].Attach.Switch != hosts[perm[j]].Attach.Switch {
				perm[i], perm[j] = perm[j], perm[i]
			}
		}
	}
	for i := range perm {
		if hosts[i].Attach.Switch == hosts[perm[i]].Attach.Switch {
			perm[i] = -1
		}
	}
	return perm
}

// p2pOf is one point-to-point collective of pairs.
func p2pOf(pairs [][2]models.Host) []Collective {
	c := Collective{Kind: KindPointToPoint, Ranks: len(pairs)}
	for _, p := range pairs {
		c.Conns = append(c.Conns, Connection{Src: p[0], Dst: p[1]})
	}
	return []Collective{c}
}

// ringOf is a ring over members, in their order.
func ringOf(members []models.Host) Collective {
	c := Collective{Kind: PatternRing, Ranks: len(members)}
	for i, h := range members {
		c.Conns = append(c.Conns, Connection{Src: h, Dst: members[(i+1)%len(members)]})
	}
	return c
}

// allToAllOf is every member sending to every other.
func allToAllOf(members []models.Host) Collective {
	c := Collective{Kind: PatternAllToAll, Ranks: len(members)}
	for _, a := range members {
		for _, b := range members {
			if a.Name != b.Name {
				c.Conns = append(c.Conns, Connection{Src: a, Dst: b})
			}
		}
	}
	return c
}

// multiTenant gives tenants (default 4) jobs of random sizes over
// scattered hosts, rings and all-to-alls in turn.
func multiTenant(hosts []models.Host, tenants int, rng *rand.Rand) ([]Collective, error) {
	t := tenants
	if t == 0 {
		t = 4
	}
	if 2*t > len(hosts) {
		return nil, fmt.Errorf("%w: %d tenants need at least %d hosts", models.ErrInvalid, t, 2*t)
	}
	order := rng.Perm(len(hosts)) // tenants get scattered hosts: fragmentation
	// Random sizes of at least 2 that add up to the host count.
	sizes := make([]int, t)
	for i := range sizes {
		sizes[i] = 2
	}
	for left := len(hosts) - 2*t; left > 0; left-- {
		sizes[rng.IntN(t)]++
	}
	var out []Collective
	at := 0
	for i, n := range sizes {
		var members []models.Host
		for _, j := range order[at : at+n] {
			members = append(members, hosts[j])
		}
		at += n
		if i%2 == 0 {
			out = append(out, ringOf(members))
		} else {
			out = append(out, allToAllOf(members))
		}
	}
	return out, nil
}
