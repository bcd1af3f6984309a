// Package pathcalc computes routes for a fabric: pure functions from a
// topology snapshot (and, later, link load and intents) to the forwarding
// state every switch should have. It does no I/O.
package pathcalc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// ErrTableFull means a switch would need more entries than its pipeline has.
var ErrTableFull = errors.New("pathcalc: table full")

// Limits are the pipeline sizes to respect (from the P4Info). Zero means
// unlimited.
type Limits struct {
	RouteEntries int // LPM routes per switch
	SelectorSize int // action-selector members per switch (sum of group sizes + members)
	MaxGroupSize int // members per ECMP group
}

// Request is what Compute routes.
type Request struct {
	Limits Limits
	// DownLinks are left out of every path.
	DownLinks map[models.LinkID]bool
}

// Warning is something Compute had to compromise on, such as a group trimmed
// to the pipeline's maximum size.
type Warning struct {
	Switch  models.SwitchID `json:"switch"`
	Message string          `json:"message"`
}

// Result is a plan plus what Compute had to give up to produce it.
type Result struct {
	Plan     models.Plan
	Warnings []Warning
}

// Compute returns shortest-path ECMP forwarding state for every switch:
//   - at a leaf, a /32 route per attached host to its port;
//   - at every other switch, for every leaf with hosts, a route to the leaf's
//     prefix (or to each of its hosts' /32 when it has no prefix) through a
//     group of all ports on shortest paths toward that leaf, equal weights.
//
// Selector members are one per egress port (member ID = port number). Groups
// are shared by routes with the same port set; a group's ID is derived from
// its port set so it stays the same across recomputations. Groups larger
// than Limits.MaxGroupSize keep the lowest-numbered ports and produce a
// Warning: traffic still reaches its destination, on fewer paths.
func Compute(ctx context.Context, snap *topology.Snapshot, req Request) (Result, error) {
	type dest struct {
		leaf     models.SwitchID
		prefixes []netip.Prefix
	}
	var dests []dest
	for _, sw := range snap.Switches() {
		if sw.Role != models.RoleLeaf {
			continue
		}
		hosts := snap.HostsOn(sw.Name)
		if len(hosts) == 0 {
			continue
		}
		d := dest{leaf: sw.Name}
		if sw.Prefix.IsValid() {
			d.prefixes = []netip.Prefix{sw.Prefix}
		} else {
			for _, h := range hosts {
				d.prefixes = append(d.prefixes, netip.PrefixFrom(h.IP, 32))
			}
		}
		dests = append(dests, d)
	}

	// routesTo[sw][prefix] = egress ports toward the prefix.
	routesTo := make(map[models.SwitchID]map[netip.Prefix][]uint32, len(snap.Switches()))
	for _, sw := range snap.Switches() {
		routesTo[sw.Name] = map[netip.Prefix][]uint32{}
	}
	for _, d := range dests {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		dist := distancesTo(snap, d.leaf, req.DownLinks)
		for sw, routes := range routesTo {
			if sw == d.leaf {
				continue
			}
			ds, ok := dist[sw]
			if !ok {
				continue // unreachable: no route, packets drop at the default action
			}
			var ports []uint32
			for _, a := range snap.Neighbors(sw) {
				if req.DownLinks[a.Link] {
					continue
				}
				if dp, ok := dist[a.Peer]; ok && dp == ds-1 {
					ports = append(ports, a.LocalPort)
				}
			}
			for _, p := range d.prefixes {
				routes[p] = ports
			}
		}
		for _, h := range snap.HostsOn(d.leaf) {
			routesTo[d.leaf][netip.PrefixFrom(h.IP, 32)] = []uint32{h.Attach.Port}
		}
	}

	res := Result{Plan: models.Plan{Switches: make(map[models.SwitchID]models.ForwardingState, len(routesTo))}}
	for _, sw := range snap.Switches() {
		state, warnings, err := buildState(sw.Name, routesTo[sw.Name], req.Limits)
		if err != nil {
			return Result{}, err
		}
		res.Plan.Switches[sw.Name] = state
		res.Warnings = append(res.Warnings, warnings...)
	}
	return res, nil
}

// distancesTo is a BFS over switches from dst, in hops.
func distancesTo(snap *topology.Snapshot, dst models.SwitchID, down map[models.LinkID]bool) map[models.SwitchID]int {
	dist := map[models.SwitchID]int{dst: 0}
	queue := []models.SwitchID{dst}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, a := range snap.Neighbors(cur) {
			if down[a.Link] {
				continue
			}
			if _, seen := dist[a.Peer]; !seen {
				dist[a.Peer] = dist[cur] + 1
				queue = append(queue, a.Peer)
			}
		}
	}
	return dist
}

func portSetKey(ports []uint32) string {
	b := make([]byte, 0, 4*len(ports))
	for _, p := range ports {
		b = fmt.Appendf(b, "%d,", p)
	}
	return string(b)
}

// groupID derives a stable non-zero 31-bit ID from a port set, probing past
// IDs already taken on the same switch.
func groupID(key string, taken map[uint32]bool) uint32 {
	h := fnv.New32a()
	h.Write([]byte(key))
	id := h.Sum32() & 0x7fffffff
	for id == 0 || taken[id] {
		id = (id + 1) & 0x7fffffff
	}
	return id
}

func buildState(sw models.SwitchID, routes map[netip.Prefix][]uint32, lim Limits) (models.ForwardingState, []Warning, error) {
	var st models.ForwardingState
	var warnings []Warning
	if lim.RouteEntries > 0 && len(routes) > lim.RouteEntries {
		return st, nil, fmt.Errorf("%w: %s needs %d routes, ipv4_lpm holds %d", ErrTableFull, sw, len(routes), lim.RouteEntries)
	}
	prefixes := make([]netip.Prefix, 0, len(routes))
	for p, ports := range routes {
		if len(ports) > 0 {
			prefixes = append(prefixes, p)
		}
	}
	slices.SortFunc(prefixes, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return cmp.Compare(a.Bits(), b.Bits())
	})
	members := map[uint32]bool{}
	groupsByKey := map[string]models.Group{}
	var keys []string
	portsByKey := map[string][]uint32{}
	routeKey := make(map[netip.Prefix]string, len(prefixes))
	for _, p := range prefixes {
		ports := slices.Clone(routes[p])
		slices.Sort(ports)
		ports = slices.Compact(ports)
		if lim.MaxGroupSize > 0 && len(ports) > lim.MaxGroupSize {
			warnings = append(warnings, Warning{Switch: sw, Message: fmt.Sprintf(
				"route %s has %d equal-cost ports; the selector's max group size is %d, so only ports %d..%d are used",
				p, len(ports), lim.MaxGroupSize, ports[0], ports[lim.MaxGroupSize-1])})
			ports = ports[:lim.MaxGroupSize]
		}
		for _, port := range ports {
			members[port] = true
		}
		if len(ports) == 1 {
			st.Routes = append(st.Routes, models.Route{Prefix: p, MemberID: ports[0]})
			continue
		}
		key := portSetKey(ports)
		routeKey[p] = key
		if _, ok := portsByKey[key]; !ok {
			portsByKey[key] = ports
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	taken := map[uint32]bool{}
	for _, key := range keys {
		id := groupID(key, taken)
		taken[id] = true
		g := models.Group{ID: id}
		for _, port := range portsByKey[key] {
			g.Members = append(g.Members, models.GroupMember{MemberID: port, Weight: 1})
		}
		groupsByKey[key] = g
		st.Groups = append(st.Groups, g)
	}
	for _, p := range prefixes {
		if key, ok := routeKey[p]; ok {
			st.Routes = append(st.Routes, models.Route{Prefix: p, GroupID: groupsByKey[key].ID})
		}
	}
	for port := range members {
		st.Members = append(st.Members, models.Member{ID: port, Port: port})
	}
	used := len(st.Members)
	for _, g := range st.Groups {
		used += len(g.Members)
	}
	if lim.SelectorSize > 0 && used > lim.SelectorSize {
		return st, nil, fmt.Errorf("%w: %s needs %d selector entries, the selector holds %d", ErrTableFull, sw, used, lim.SelectorSize)
	}
	return st.Canonical(), warnings, nil
}
