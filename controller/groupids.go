package controller

import (
	"hash/fnv"
	"net/netip"
	"slices"

	"github.com/accelnet/accelnet/models"
)

// adoptGroupIDs renames desired's groups that a switch does not have to
// the IDs of groups it has that desired no longer uses, where the two
// carry exactly the same routes. Group IDs are derived from members and
// weights (pathcalc), so a re-weighting (a failure elsewhere changes what
// a leaf's uplinks can carry toward one pod) would otherwise insert a
// group, re-point every route that uses it and delete the old one: at a
// k=16 leaf, some 120 updates where one group modify does the same, all
// of its routes moving at once (the group's members change atomically,
// so this is as safe as re-pointing them in one write). A group still
// used by routes that go elsewhere is never changed in place. The result
// is a function of desired and what the switch has, so the next
// reconcile, or a restarted controller reading the switch back, arrives
// at the same names and writes nothing.
//
// It returns the renames too (desired's ID → the switch's), which a
// handover mark keeps: with them a new term arrives at the same names from
// the same plan without reading the switch.
func adoptGroupIDs(desired, actual models.ForwardingState) (models.ForwardingState, map[uint32]uint32) {
	have := make(map[uint32]bool, len(actual.Groups))
	for _, g := range actual.Groups {
		have[g.ID] = true
	}
	want := make(map[uint32]bool, len(desired.Groups))
	missing := false
	for _, g := range desired.Groups {
		want[g.ID] = true
		missing = missing || !have[g.ID]
	}
	if !missing {
		return desired, nil
	}
	// The routes on each group, by a hash of their prefixes.
	routesOf := func(st models.ForwardingState, keep func(uint32) bool) map[uint32][]netip.Prefix {
		out := map[uint32][]netip.Prefix{}
		for _, r := range st.Routes {
			if r.GroupID != 0 && keep(r.GroupID) {
				out[r.GroupID] = append(out[r.GroupID], r.Prefix)
			}
		}
		for _, ps := range out {
			slices.SortFunc(ps, func(a, b netip.Prefix) int {
				if c := a.Addr().Compare(b.Addr()); c != 0 {
					return c
				}
				return a.Bits() - b.Bits()
			})
		}
		return out
	}
	sum := func(ps []netip.Prefix) uint64 {
		h := fnv.New64a()
		for _, p := range ps {
			b, _ := p.MarshalBinary()
			h.Write(b)
		}
		return h.Sum64()
	}
	freed := routesOf(actual, func(id uint32) bool { return !want[id] }) // groups desired drops
	if len(freed) == 0 {
		return desired, nil
	}
	byRoutes := map[uint64][]uint32{}
	for id, ps := range freed {
		byRoutes[sum(ps)] = append(byRoutes[sum(ps)], id)
	}
	newcomers := routesOf(desired, func(id uint32) bool { return !have[id] })
	rename := map[uint32]uint32{}
	taken := map[uint32]bool{}
	for id, ps := range newcomers {
		for _, old := range byRoutes[sum(ps)] {
			if !taken[old] && slices.Equal(freed[old], ps) {
				rename[id], taken[old] = old, true
				break
			}
		}
	}
	if len(rename) == 0 {
		return desired, nil
	}
	return renameGroups(desired, rename), rename
}

// renameGroups is desired with its groups' IDs renamed (an ID → the ID it
// takes), in canonical order; desired itself if there is nothing to rename.
func renameGroups(desired models.ForwardingState, rename map[uint32]uint32) models.ForwardingState {
	if len(rename) == 0 {
		return desired
	}
	out := desired
	out.Groups = slices.Clone(desired.Groups)
	for i, g := range out.Groups {
		if to, ok := rename[g.ID]; ok {
			out.Groups[i].ID = to
		}
	}
	out.Routes = slices.Clone(desired.Routes)
	for i, r := range out.Routes {
		if to, ok := rename[r.GroupID]; ok {
			out.Routes[i].GroupID = to
		}
	}
	return out.Canonical()
}
