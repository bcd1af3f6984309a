package models

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"
)

// randomState is a state of n routes (a member or one of a few groups
// each), their members and groups, and some pins, with keys drawn from a
// small space so that two such states share most of them.
func randomState(rng *rand.Rand, n int) ForwardingState {
	var s ForwardingState
	for id := uint32(1); id <= 8; id++ {
		if rng.IntN(4) != 0 {
			s.Members = append(s.Members, Member{ID: id, Port: id + uint32(rng.IntN(2))})
		}
	}
	for id := uint32(100); id < 104; id++ {
		g := Group{ID: id}
		for m := uint32(1); m <= 8; m++ {
			if rng.IntN(2) == 0 {
				g.Members = append(g.Members, GroupMember{MemberID: m, Weight: 1 + int32(rng.IntN(2))})
			}
		}
		s.Groups = append(s.Groups, g)
	}
	for range n {
		r := Route{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(rng.IntN(4)), byte(rng.IntN(min(n, 256))), 0}), 24-rng.IntN(2)*8).Masked()}
		if rng.IntN(2) == 0 {
			r.GroupID = 100 + uint32(rng.IntN(4))
		} else {
			r.MemberID = 1 + uint32(rng.IntN(8))
		}
		s.Routes = append(s.Routes, r)
	}
	for range 4 {
		s.FlowPins = append(s.FlowPins, FlowPin{Key: FlowKey{Src: netip.AddrFrom4([4]byte{10, 0, 0, byte(rng.IntN(4))}),
			Dst: netip.AddrFrom4([4]byte{10, 0, 1, 1}), SrcPort: uint16(rng.IntN(3))}, Port: 1 + uint32(rng.IntN(2))})
	}
	s.PortMACs = []PortMAC{{Port: 1 + uint32(rng.IntN(3))}}
	s.Punts = []uint16{EtherTypeLLDP}
	s = s.Canonical()
	// One entry per key, as on a switch.
	s.Routes = slices.CompactFunc(s.Routes, func(a, b Route) bool { return a.Prefix == b.Prefix })
	s.FlowPins = slices.CompactFunc(s.FlowPins, func(a, b FlowPin) bool { return a.Key == b.Key })
	return s
}

// shuffled is s with every list and every group's members in random
// order.
func shuffled(rng *rand.Rand, s ForwardingState) ForwardingState {
	c := s.Canonical()
	mix := func(n int, swap func(i, j int)) { rng.Shuffle(n, swap) }
	mix(len(c.Members), func(i, j int) { c.Members[i], c.Members[j] = c.Members[j], c.Members[i] })
	mix(len(c.Routes), func(i, j int) { c.Routes[i], c.Routes[j] = c.Routes[j], c.Routes[i] })
	mix(len(c.FlowPins), func(i, j int) { c.FlowPins[i], c.FlowPins[j] = c.FlowPins[j], c.FlowPins[i] })
	mix(len(c.Groups), func(i, j int) { c.Groups[i], c.Groups[j] = c.Groups[j], c.Groups[i] })
	for _, g := range c.Groups {
		mix(len(g.Members), func(i, j int) { g.Members[i], g.Members[j] = g.Members[j], g.Members[i] })
	}
	return c
}

// TestComputeInAnyOrder: the diff of two canonical states (walked side by
// side) is the diff of the same states in any order (looked up through
// maps), for 2,000 random pairs.
func TestComputeInAnyOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	canon := func(d Diff) Diff {
		return Diff{Insert: d.Insert.Canonical(), Modify: d.Modify.Canonical(), Delete: d.Delete.Canonical()}
	}
	writes := 0
	for i := range 2000 {
		desired, actual := randomState(rng, 1+rng.IntN(30)), randomState(rng, 1+rng.IntN(30))
		walked := Compute(desired, actual)
		looked := Compute(shuffled(rng, desired), shuffled(rng, actual))
		if !reflect.DeepEqual(canon(walked), canon(looked)) {
			t.Fatalf("pair %d: side by side %+v, through maps %+v", i, walked, looked)
		}
		if d := Compute(desired, desired); !d.Empty() {
			t.Fatalf("pair %d: a state against itself gives %d writes", i, d.Len())
		}
		writes += walked.Len()
	}
	if writes < 2000 {
		t.Fatalf("%d writes in all: the pairs do not differ enough to test the diff", writes)
	}
}

// TestComputeCanonicalMakesNoMaps: diffing two canonical states of 1,200
// routes (a k=48 switch) allocates only the lists it returns: no map per
// table, none per group compared.
func TestComputeCanonicalMakesNoMaps(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	desired := randomState(rng, 1200)
	actual := desired.Canonical()
	actual.Routes[0].MemberID, actual.Routes[0].GroupID = 0, 100 // one route to modify
	allocs := testing.AllocsPerRun(20, func() {
		if d := Compute(desired, actual); d.Len() != 1 {
			panic(fmt.Sprintf("%d writes, want 1", d.Len()))
		}
	})
	if allocs > 2 {
		t.Fatalf("Compute of two canonical states made %.0f allocations, want at most 2 (the modified route's list)", allocs)
	}
}

// BenchmarkCompute: a reconcile's diff of a k=48 switch's state (about
// 1,000 routes) against its read-back, one route changed.
func BenchmarkCompute(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	desired := randomState(rng, 1200)
	actual := desired.Canonical()
	actual.Routes[0].MemberID, actual.Routes[0].GroupID = 0, 100
	b.ReportAllocs()
	for b.Loop() {
		Compute(desired, actual)
	}
}
