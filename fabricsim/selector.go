package fabricsim

import (
	"cmp"
	"maps"
	"slices"
)

// selector is an action selector as BMv2 behind PI (simple_switch_grpc)
// keeps it, so that fabricsim picks the member BMv2 picks for the same
// writes:
//
//   - BMv2 gives every member a handle, the lowest one free;
//   - a group is a set of member handles, and a packet takes the
//     (hash mod size)-th handle in ascending order;
//   - PI has no weights in BMv2: a member of weight w in a group is w
//     handles, the member's first w (created, lowest free, when a group
//     first needs them, in member-ID order), and handles no group needs
//     any more are deleted from the member's last one down.
//
// The member and group IDs of P4Runtime are PI's; the handles are BMv2's.
type selector struct {
	used    []bool // handle → allocated
	handles map[uint32][]uint32
	// weights counts, per member, the groups that hold it with each
	// weight (weight 1 is also held by the member itself, as PI counts).
	weights map[uint32]map[int32]int
	// groups is each group's membership (member → weight), and
	// groupHandles the handles BMv2 holds for it.
	groups       map[uint32]map[uint32]int32
	groupHandles map[uint32]map[uint32]bool
}

func newSelector() *selector {
	return &selector{handles: map[uint32][]uint32{}, weights: map[uint32]map[int32]int{},
		groups: map[uint32]map[uint32]int32{}, groupHandles: map[uint32]map[uint32]bool{}}
}

// alloc returns the lowest free handle (BMv2's HandleMgr).
func (s *selector) alloc() uint32 {
	for h, u := range s.used {
		if !u {
			s.used[h] = true
			return uint32(h)
		}
	}
	s.used = append(s.used, true)
	return uint32(len(s.used) - 1)
}

func (s *selector) free(h uint32) {
	if int(h) < len(s.used) {
		s.used[h] = false
	}
}

// addMember is a member INSERT.
func (s *selector) addMember(id uint32) {
	s.handles[id] = []uint32{s.alloc()}
	s.weights[id] = map[int32]int{1: 1}
}

// deleteMember is a member DELETE (no group may hold it).
func (s *selector) deleteMember(id uint32) {
	for _, h := range s.handles[id] {
		s.free(h)
	}
	delete(s.handles, id)
	delete(s.weights, id)
}

// setGroup is a group INSERT or MODIFY to the given membership.
func (s *selector) setGroup(gid uint32, want map[uint32]int32) {
	cur := s.groups[gid]
	if cur == nil {
		cur = map[uint32]int32{}
		s.groups[gid] = cur
		s.groupHandles[gid] = map[uint32]bool{}
	}
	in := s.groupHandles[gid]
	ids := slices.Sorted(maps.Keys(cur))
	for id := range want {
		if _, ok := cur[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids) // PI walks the union in member-ID order
	for _, id := range ids {
		from, to := cur[id], want[id]
		for len(s.handles[id]) < int(to) {
			s.handles[id] = append(s.handles[id], s.alloc())
		}
		if from > 0 {
			s.weights[id][from]--
		}
		for i := from - 1; i >= to; i-- {
			delete(in, s.handles[id][i])
		}
		for i := from; i < to; i++ {
			in[s.handles[id][i]] = true
		}
		if to > 0 {
			s.weights[id][to]++
			cur[id] = to
		} else {
			delete(cur, id)
		}
	}
	for _, id := range ids {
		s.purge(id)
	}
}

// deleteGroup is a group DELETE.
func (s *selector) deleteGroup(gid uint32) {
	for _, id := range slices.Sorted(maps.Keys(s.groups[gid])) {
		s.weights[id][s.groups[gid][id]]--
		s.purge(id)
	}
	delete(s.groups, gid)
	delete(s.groupHandles, gid)
}

// purge deletes a member's handles beyond the highest weight any group
// (or the member itself) still holds it with.
func (s *selector) purge(id uint32) {
	top := int32(0)
	for w, n := range s.weights[id] {
		if n > 0 {
			top = max(top, w)
		}
	}
	hs := s.handles[id]
	for len(hs) > int(top) && len(hs) > 0 {
		s.free(hs[len(hs)-1])
		hs = hs[:len(hs)-1]
	}
	s.handles[id] = hs
}

// owners maps every handle to its member.
func (s *selector) owners() map[uint32]uint32 {
	owner := map[uint32]uint32{}
	for id, hs := range s.handles {
		for _, h := range hs {
			owner[h] = id
		}
	}
	return owner
}

// orderBy is a group's members as BMv2 walks them: one entry per handle
// (a member of weight w appears w times), in ascending handle order;
// owner is every handle's member (owners), made once for all the groups
// of a table: made for each group, a k=48 switch's table compile walked
// every handle of the switch once per route (the emulator's dataplane
// recomputation after a failure spent 2.9 s of 45 there).
func (s *selector) orderBy(owner map[uint32]uint32, gid uint32) []uint32 {
	hs := slices.SortedFunc(maps.Keys(s.groupHandles[gid]), cmp.Compare[uint32])
	out := make([]uint32, len(hs))
	for i, h := range hs {
		out[i] = owner[h]
	}
	return out
}

// clone copies the state (a pipeline reconcile keeps it).
func (s *selector) clone() *selector {
	c := &selector{used: slices.Clone(s.used), handles: map[uint32][]uint32{}, weights: map[uint32]map[int32]int{},
		groups: map[uint32]map[uint32]int32{}, groupHandles: map[uint32]map[uint32]bool{}}
	for id, hs := range s.handles {
		c.handles[id] = slices.Clone(hs)
	}
	for id, w := range s.weights {
		c.weights[id] = maps.Clone(w)
	}
	for id, g := range s.groups {
		c.groups[id] = maps.Clone(g)
	}
	for id, g := range s.groupHandles {
		c.groupHandles[id] = maps.Clone(g)
	}
	return c
}
