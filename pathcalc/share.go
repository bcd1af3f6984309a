package pathcalc

import (
	"encoding/binary"
	"slices"

	"github.com/accelnet/accelnet/models"
)

// routeLists shares equal route lists between the switches of one plan.
// Most switches of a Clos route alike: every core switch of a fat-tree
// has the same routes (pod p through port p), and so do the aggregation
// switches of a pod; only a leaf's own hosts make its list its own. At
// k=48 that is 1,201 distinct lists for 2,880 switches, and the lists
// were an eighth of the controller's live heap (1,152 routes of 40 bytes
// per switch). Plans are never changed in place (every consumer copies
// before it changes a state, as Recompute already shared a switch's state
// between two plans), so sharing is safe.
type routeLists map[uint64][][]models.Route

// share returns a list equal to routes that an earlier call returned, or
// routes itself (remembered for the next calls).
func (l routeLists) share(routes []models.Route) []models.Route {
	if len(routes) == 0 {
		return routes
	}
	h := routesHash(routes)
	for _, known := range l[h] {
		if slices.Equal(known, routes) {
			return known
		}
	}
	l[h] = append(l[h], routes)
	return routes
}

// routesHash is FNV-1a over the routes' fields (fnvAdd).
func routesHash(routes []models.Route) uint64 {
	h := uint64(fnvOffset)
	for _, r := range routes {
		a := r.Prefix.Addr().As16()
		h = fnvAdd(h, binary.BigEndian.Uint64(a[:8]))
		h = fnvAdd(h, binary.BigEndian.Uint64(a[8:]))
		h = fnvAdd(h, uint64(r.Prefix.Bits())<<32|uint64(r.MemberID))
		h = fnvAdd(h, uint64(r.GroupID))
	}
	return h
}
