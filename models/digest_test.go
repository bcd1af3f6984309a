package models

import (
	"net/netip"
	"slices"
	"testing"
)

func digestState() ForwardingState {
	seed := uint32(7)
	pin := func(i int, port uint32) FlowPin {
		return FlowPin{Key: FlowKey{Src: netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), Dst: netip.MustParseAddr("10.0.1.1"), SrcPort: uint16(49152 + i)}, Port: port}
	}
	return ForwardingState{
		Members: []Member{{ID: 1, Port: 1}, {ID: 2, Port: 2}},
		Groups:  []Group{{ID: 5, Members: []GroupMember{{MemberID: 1, Weight: 1}, {MemberID: 2, Weight: 3}}}},
		Routes: []Route{{Prefix: netip.MustParsePrefix("10.0.1.0/24"), GroupID: 5},
			{Prefix: netip.MustParsePrefix("10.0.2.0/24"), MemberID: 1}},
		FlowPins: []FlowPin{pin(1, 1), pin(2, 2), pin(3, 1)},
		PortMACs: []PortMAC{{Port: 1, Src: MAC{2, 0, 0, 0, 0, 1}, Dst: MAC{2, 0, 0, 0, 1, 1}}},
		Punts:    []uint16{EtherTypeLLDP},
		HashSeed: &seed,
	}
}

// TestDigest: a state's digest does not depend on the order of its lists
// (or of a group's members), follows pins added and removed one by one,
// and changes with any field of any entry.
func TestDigest(t *testing.T) {
	s := digestState()
	d := StateDigest(s)
	if len(d.String()) != 32 {
		t.Fatalf("digest %q, want 32 hex characters", d)
	}
	shuffled := s
	shuffled.Routes = slices.Clone(s.Routes)
	slices.Reverse(shuffled.Routes)
	shuffled.FlowPins = slices.Clone(s.FlowPins)
	slices.Reverse(shuffled.FlowPins)
	shuffled.Groups = []Group{{ID: 5, Members: []GroupMember{s.Groups[0].Members[1], s.Groups[0].Members[0]}}}
	if StateDigest(shuffled) != d {
		t.Error("the same entries in another order have another digest")
	}

	noPins := s
	noPins.FlowPins = nil
	var pins Digest
	for _, p := range s.FlowPins {
		pins.AddPin(p)
	}
	if StateDigest(noPins).Plus(pins) != d {
		t.Error("a state's digest is not its routes' plus its pins'")
	}
	extra := FlowPin{Key: FlowKey{Src: netip.MustParseAddr("10.0.0.9"), Dst: netip.MustParseAddr("10.0.1.1"), SrcPort: 1}, Port: 2}
	pins.AddPin(extra)
	if StateDigest(noPins).Plus(pins) == d {
		t.Error("a pin more, the same digest")
	}
	pins.RemovePin(extra)
	if StateDigest(noPins).Plus(pins) != d {
		t.Error("a pin added then removed changed the digest")
	}

	seed := uint32(8)
	changes := []struct {
		name   string
		change func(*ForwardingState)
	}{
		{"member port", func(s *ForwardingState) { s.Members = []Member{{ID: 1, Port: 3}, s.Members[1]} }},
		{"group weight", func(s *ForwardingState) {
			s.Groups = []Group{{ID: 5, Members: []GroupMember{{MemberID: 1, Weight: 2}, {MemberID: 2, Weight: 3}}}}
		}},
		{"group ID", func(s *ForwardingState) { s.Groups = []Group{{ID: 6, Members: s.Groups[0].Members}} }},
		{"route prefix length", func(s *ForwardingState) {
			s.Routes = []Route{{Prefix: netip.MustParsePrefix("10.0.1.0/25"), GroupID: 5}, s.Routes[1]}
		}},
		{"route to a member instead of a group", func(s *ForwardingState) {
			s.Routes = []Route{{Prefix: s.Routes[0].Prefix, MemberID: 5}, s.Routes[1]}
		}},
		{"pin port", func(s *ForwardingState) {
			s.FlowPins = []FlowPin{{Key: s.FlowPins[0].Key, Port: 9}, s.FlowPins[1], s.FlowPins[2]}
		}},
		{"pin source port", func(s *ForwardingState) {
			k := s.FlowPins[0].Key
			k.SrcPort++
			s.FlowPins = []FlowPin{{Key: k, Port: 1}, s.FlowPins[1], s.FlowPins[2]}
		}},
		{"port MAC", func(s *ForwardingState) { s.PortMACs = []PortMAC{{Port: 1, Src: MAC{2}, Dst: s.PortMACs[0].Dst}} }},
		{"punt", func(s *ForwardingState) { s.Punts = nil }},
		{"hash seed", func(s *ForwardingState) { s.HashSeed = &seed }},
		{"no hash seed", func(s *ForwardingState) { s.HashSeed = nil }},
		{"a pin fewer", func(s *ForwardingState) { s.FlowPins = s.FlowPins[1:] }},
	}
	for _, tc := range changes {
		changed := digestState()
		tc.change(&changed)
		if StateDigest(changed) == d {
			t.Errorf("%s: the same digest", tc.name)
		}
	}
}
