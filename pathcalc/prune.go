package pathcalc

import (
	"net/netip"
	"slices"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// Prune is the first, immediate step of rerouting around failed links:
// plan with every next hop taken out that crosses a link in down or leads
// to a switch that, by plan's own routes, can no longer deliver to the
// destination. What remains is a subset of plan's next hops: plan routes
// without loops, so the pruned plan does too, whatever mix of pruned and
// unpruned switches the fabric goes through while it is written. A route
// left with no next hop keeps its old ones (it loses its traffic either
// way, until the new plan reaches it). Member weights are kept; a pruned
// group gets an ID of its own (derived, like every group ID, from its
// members).
func Prune(snap *topology.Snapshot, plan models.Plan, down map[models.LinkID]bool) models.Plan {
	// peer[sw][port] is the switch a port leads to over a working link.
	peer := map[models.SwitchID]map[uint32]models.SwitchID{}
	for _, sw := range snap.Switches() {
		m := map[uint32]models.SwitchID{}
		for _, a := range snap.Neighbors(sw.Name) {
			if !down[a.Link] {
				m[a.LocalPort] = a.Peer
			}
		}
		peer[sw.Name] = m
	}
	// hops[prefix][sw] are the ports sw's route to prefix uses.
	hops := map[netip.Prefix]map[models.SwitchID][]uint32{}
	for sw, st := range plan.Switches {
		groups := map[uint32]models.Group{}
		for _, g := range st.Groups {
			groups[g.ID] = g
		}
		for _, r := range st.Routes {
			var ports []uint32
			if r.MemberID != 0 {
				ports = []uint32{r.MemberID}
			}
			for _, m := range groups[r.GroupID].Members {
				ports = append(ports, m.MemberID)
			}
			if hops[r.Prefix] == nil {
				hops[r.Prefix] = map[models.SwitchID][]uint32{}
			}
			hops[r.Prefix][sw] = ports
		}
	}
	// good[prefix] are the switches that still deliver it: the leaf that
	// owns it, and any switch with a working next hop to a good one.
	good := map[netip.Prefix]map[models.SwitchID]bool{}
	for p, bySw := range hops {
		g := map[models.SwitchID]bool{}
		for _, sw := range snap.Switches() {
			if sw.Prefix == p || (p.Bits() == 32 && slices.ContainsFunc(snap.HostsOn(sw.Name), func(h models.Host) bool { return h.IP == p.Addr() })) {
				g[sw.Name] = true
			}
		}
		for changed := true; changed; { // plan's routes form a DAG: this ends
			changed = false
			for sw, ports := range bySw {
				if g[sw] {
					continue
				}
				for _, port := range ports {
					if nb, ok := peer[sw][port]; ok && g[nb] {
						g[sw], changed = true, true
						break
					}
				}
			}
		}
		good[p] = g
	}
	out := models.Plan{Switches: make(map[models.SwitchID]models.ForwardingState, len(plan.Switches))}
	for sw, st := range plan.Switches {
		groups := map[uint32]models.Group{}
		taken := map[uint32]bool{} // every old ID: a pruned group never reuses one
		for _, g := range st.Groups {
			groups[g.ID] = g
			taken[g.ID] = true
		}
		kept := map[uint32]bool{}
		ns := models.ForwardingState{Members: st.Members, FlowPins: st.FlowPins}
		var newGroups []models.Group
		groupFor := map[string]uint32{}
		keep := func(port uint32, p netip.Prefix) bool {
			nb, ok := peer[sw][port]
			if !ok {
				_, isHost := snap.HostAt(models.Endpoint{Switch: sw, Port: port})
				return isHost // a host port: delivery, not a next hop
			}
			return good[p][nb]
		}
		for _, r := range st.Routes {
			if r.GroupID == 0 {
				ns.Routes = append(ns.Routes, r)
				continue
			}
			g := groups[r.GroupID]
			var left []models.GroupMember
			for _, m := range g.Members {
				if keep(m.MemberID, r.Prefix) {
					left = append(left, m)
				}
			}
			switch {
			case len(left) == 0 || len(left) == len(g.Members):
				ns.Routes = append(ns.Routes, r)
				if !kept[g.ID] {
					kept[g.ID] = true
					newGroups = append(newGroups, g)
				}
			case len(left) == 1:
				ns.Routes = append(ns.Routes, models.Route{Prefix: r.Prefix, MemberID: left[0].MemberID})
			default:
				ports := make([]uint32, len(left))
				weights := make([]int32, len(left))
				for i, m := range left {
					ports[i], weights[i] = m.MemberID, m.Weight
				}
				key := portSetKey(ports, weights)
				id, ok := groupFor[key]
				if !ok {
					id = groupID("pruned:"+key, taken)
					taken[id] = true
					groupFor[key] = id
					newGroups = append(newGroups, models.Group{ID: id, Members: left})
				}
				ns.Routes = append(ns.Routes, models.Route{Prefix: r.Prefix, GroupID: id})
			}
		}
		ns.Groups = newGroups
		out.Switches[sw] = ns.Canonical()
	}
	return out
}
