package models

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

func validTopology() Topology {
	return Topology{
		Switches: []Switch{
			{Name: "spine1", Role: RoleSpine, DeviceID: 1},
			{Name: "leaf1", Role: RoleLeaf, DeviceID: 2, Prefix: netip.MustParsePrefix("10.0.1.0/24")},
			{Name: "leaf2", Role: RoleLeaf, DeviceID: 3, Prefix: netip.MustParsePrefix("10.0.2.0/24")},
		},
		Links: []Link{
			{A: Endpoint{"leaf1", 3}, B: Endpoint{"spine1", 1}, Gbps: 400},
			{A: Endpoint{"leaf2", 3}, B: Endpoint{"spine1", 2}, Gbps: 400},
		},
		Hosts: []Host{
			{Name: "h1", IP: netip.MustParseAddr("10.0.1.1"), Attach: Endpoint{"leaf1", 1}, NICGbps: 400},
			{Name: "h2", IP: netip.MustParseAddr("10.0.2.1"), Attach: Endpoint{"leaf2", 1}, NICGbps: 400},
		},
	}
}

func TestTopologyValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Topology)
		wantErr string // substring; empty means valid
	}{
		{name: "valid", mutate: func(*Topology) {}},
		{name: "no switches", mutate: func(t *Topology) { t.Switches = nil }, wantErr: "no switches"},
		{name: "bad switch name", mutate: func(t *Topology) { t.Switches[0].Name = "sp ine" }, wantErr: `switch name "sp ine"`},
		{name: "unknown role", mutate: func(t *Topology) { t.Switches[0].Role = "router" }, wantErr: `role "router"`},
		{name: "zero device id", mutate: func(t *Topology) { t.Switches[0].DeviceID = 0 }, wantErr: "device_id must be non-zero"},
		{name: "duplicate device id", mutate: func(t *Topology) { t.Switches[1].DeviceID = 1 }, wantErr: "already used by spine1"},
		{name: "duplicate switch", mutate: func(t *Topology) { t.Switches[2].Name = "leaf1" }, wantErr: "defined twice"},
		{name: "bad address", mutate: func(t *Topology) { t.Switches[0].P4RTAddr = "nohost" }, wantErr: "p4rt_addr"},
		{name: "unmasked prefix", mutate: func(t *Topology) { t.Switches[1].Prefix = netip.MustParsePrefix("10.0.1.5/24") }, wantErr: "host bits set"},
		{name: "prefix on spine", mutate: func(t *Topology) { t.Switches[0].Prefix = netip.MustParsePrefix("10.9.0.0/24") }, wantErr: "only leaves"},
		{name: "overlapping prefixes", mutate: func(t *Topology) { t.Switches[2].Prefix = netip.MustParsePrefix("10.0.0.0/16") }, wantErr: "overlaps"},
		{name: "link to unknown switch", mutate: func(t *Topology) { t.Links[0].B.Switch = "spine9" }, wantErr: `unknown switch "spine9"`},
		{name: "port used twice", mutate: func(t *Topology) { t.Links[1].B.Port = 1 }, wantErr: "already used"},
		{name: "cpu port", mutate: func(t *Topology) { t.Links[0].A.Port = CPUPort }, wantErr: "CPU port"},
		{name: "self link", mutate: func(t *Topology) { t.Links[0].B.Switch = "leaf1" }, wantErr: "same switch"},
		{name: "zero speed", mutate: func(t *Topology) { t.Links[0].Gbps = 0 }, wantErr: "gbps must be"},
		{name: "host on spine", mutate: func(t *Topology) { t.Hosts[0].Attach = Endpoint{"spine1", 9} }, wantErr: "not a leaf"},
		{name: "host outside prefix", mutate: func(t *Topology) { t.Hosts[0].IP = netip.MustParseAddr("10.0.3.1") }, wantErr: "outside"},
		{name: "host in another leaf's prefix", mutate: func(t *Topology) {
			t.Hosts[1].IP = netip.MustParseAddr("10.0.1.9")
			t.Switches[2].Prefix = netip.Prefix{}
		}, wantErr: "attached elsewhere"},
		{name: "duplicate host ip", mutate: func(t *Topology) { t.Hosts[1].IP = t.Hosts[0].IP; t.Switches[2].Prefix = netip.Prefix{} }, wantErr: "already used by h1"},
		{name: "ipv6 host", mutate: func(t *Topology) { t.Hosts[0].IP = netip.MustParseAddr("::1") }, wantErr: "IPv4"},
		{name: "host port shared with link", mutate: func(t *Topology) { t.Hosts[0].Attach.Port = 3 }, wantErr: "already used"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo := validTopology()
			tt.mutate(&topo)
			err := topo.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("want error containing %q, got %v", tt.wantErr, err)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
		})
	}
}

func TestParseEndpoint(t *testing.T) {
	tests := []struct {
		in   string
		want Endpoint
		ok   bool
	}{
		{"leaf1:3", Endpoint{"leaf1", 3}, true},
		{" spine-2:17 ", Endpoint{"spine-2", 17}, true},
		{"leaf1", Endpoint{}, false},
		{"leaf1:x", Endpoint{}, false},
		{":3", Endpoint{}, false},
		{"leaf1:0", Endpoint{}, false},
		{"leaf1:512", Endpoint{}, false},
	}
	for _, tt := range tests {
		got, err := ParseEndpoint(tt.in)
		if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("ParseEndpoint(%q) = %v, %v; want %v ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestLinkIDIsDirectionless(t *testing.T) {
	a := Link{A: Endpoint{"leaf1", 3}, B: Endpoint{"spine1", 1}}
	b := Link{A: Endpoint{"spine1", 1}, B: Endpoint{"leaf1", 3}}
	if a.ID() != b.ID() {
		t.Fatalf("%s != %s", a.ID(), b.ID())
	}
}

func TestInterfaceNameRoundTrip(t *testing.T) {
	for _, p := range []uint32{1, 9, 64, 511} {
		got, ok := PortFromInterface(InterfaceName(p))
		if !ok || got != p {
			t.Errorf("port %d → %q → %d, %v", p, InterfaceName(p), got, ok)
		}
	}
	if _, ok := PortFromInterface("Ethernet1/1"); ok {
		t.Error("foreign interface name accepted")
	}
}

func state() ForwardingState {
	return ForwardingState{
		Members: []Member{{ID: 1, Port: 1}, {ID: 2, Port: 2}, {ID: 3, Port: 3}},
		Groups:  []Group{{ID: 10, Members: []GroupMember{{MemberID: 2, Weight: 1}, {MemberID: 3, Weight: 1}}}},
		Routes: []Route{
			{Prefix: netip.MustParsePrefix("10.0.1.1/32"), MemberID: 1},
			{Prefix: netip.MustParsePrefix("10.0.2.0/24"), GroupID: 10},
		},
	}
}

func TestComputeDiff(t *testing.T) {
	actual := state()
	if err := actual.Validate(); err != nil {
		t.Fatal(err)
	}
	if d := Compute(actual, actual); !d.Empty() {
		t.Fatalf("diff of a state with itself has %d writes", d.Len())
	}
	desired := state()
	desired.Groups[0].Members = []GroupMember{{MemberID: 3, Weight: 1}, {MemberID: 2, Weight: 1}} // same set, other order
	if d := Compute(desired, actual); !d.Empty() {
		t.Fatalf("member order should not matter, got %+v", d)
	}
	desired.Groups[0].Members[0].Weight = 3                           // modify the group
	desired.Routes = desired.Routes[1:]                               // delete the host route
	desired.Members = desired.Members[1:]                             // ...and its member
	desired.Members = append(desired.Members, Member{ID: 4, Port: 4}) // insert
	desired.FlowPins = []FlowPin{{Key: FlowKey{Src: netip.MustParseAddr("10.0.1.1"), Dst: netip.MustParseAddr("10.0.2.1"), SrcPort: 5}, Port: 2}}
	d := Compute(desired, actual)
	if len(d.Modify.Groups) != 1 || len(d.Delete.Routes) != 1 || len(d.Delete.Members) != 1 || len(d.Insert.Members) != 1 || len(d.Insert.FlowPins) != 1 || d.Len() != 5 {
		t.Fatalf("unexpected diff %+v", d)
	}
	other := []FlowPin{{Key: FlowKey{Src: netip.MustParseAddr("10.0.1.2"), Dst: netip.MustParseAddr("10.0.2.1"), SrcPort: 5}, Port: 3}}
	if ph := (Diff{Delete: ForwardingState{FlowPins: desired.FlowPins}, Insert: ForwardingState{FlowPins: other}}).Phases(); len(ph) != 2 || ph[0].Name != "pin deletes" {
		t.Errorf("pins that go are not deleted before new ones are inserted: %+v", ph)
	}
	var names []string
	for _, p := range d.Phases() {
		names = append(names, p.Name)
	}
	if got := strings.Join(names, ","); got != "members,groups,entries,member deletes" {
		t.Errorf("phases = %s", got)
	}
}

func TestForwardingStateValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*ForwardingState)
		want   string
	}{
		{"route to unknown group", func(s *ForwardingState) { s.Routes[1].GroupID = 99 }, "unknown group"},
		{"route with both", func(s *ForwardingState) { s.Routes[0].GroupID = 10 }, "exactly one"},
		{"group with unknown member", func(s *ForwardingState) { s.Groups[0].Members[0].MemberID = 9 }, "unknown member"},
		{"zero weight", func(s *ForwardingState) { s.Groups[0].Members[0].Weight = 0 }, "weight"},
		{"empty group", func(s *ForwardingState) { s.Groups[0].Members = nil }, "no members"},
		{"unmasked route", func(s *ForwardingState) { s.Routes[1].Prefix = netip.MustParsePrefix("10.0.2.1/24") }, "masked"},
		{"duplicate route", func(s *ForwardingState) { s.Routes[1].Prefix = s.Routes[0].Prefix }, "twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := state()
			tt.mutate(&s)
			if err := s.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("want error containing %q, got %v", tt.want, err)
			}
		})
	}
}

// TestHostInAnotherLeafsPrefixAmongMany: a host whose address lies in a
// leaf's prefix must be attached to that leaf, whichever of many prefixes
// (of several sizes, declared in no order) it is, at either end of it;
// an address between or outside the prefixes is any leaf's.
func TestHostInAnotherLeafsPrefixAmongMany(t *testing.T) {
	base := func() Topology {
		var topo Topology
		topo.Switches = append(topo.Switches, Switch{Name: "spine1", Role: RoleSpine, DeviceID: 1})
		// leaf0..leaf39 own 10.<i>.0.0/24, /23 or /25, declared from the last;
		// "bare" has no prefix.
		for i := 39; i >= 0; i-- {
			bits := []int{24, 23, 25}[i%3]
			topo.Switches = append(topo.Switches, Switch{Name: SwitchID(fmt.Sprintf("leaf%d", i)), Role: RoleLeaf, DeviceID: uint64(i + 2),
				Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 0}), bits)})
		}
		topo.Switches = append(topo.Switches, Switch{Name: "bare", Role: RoleLeaf, DeviceID: 100})
		for i := range 40 {
			topo.Hosts = append(topo.Hosts, Host{Name: fmt.Sprintf("h%d", i), IP: netip.AddrFrom4([4]byte{10, byte(i), 0, 9}),
				Attach: Endpoint{SwitchID(fmt.Sprintf("leaf%d", i)), 1}, NICGbps: 100})
		}
		return topo
	}
	tests := []struct {
		ip      string
		wantErr string
	}{
		{"10.4.0.0", "inside leaf4's prefix 10.4.0.0/23"},      // a /23's first address
		{"10.4.1.255", "inside leaf4's prefix 10.4.0.0/23"},    // its last
		{"10.5.0.127", "inside leaf5's prefix 10.5.0.0/25"},    // a /25's last
		{"10.39.0.255", "inside leaf39's prefix 10.39.0.0/24"}, // the highest prefix
		{"10.0.0.0", "inside leaf0's prefix 10.0.0.0/24"},      // the lowest
		{"10.5.0.128", ""},    // just past a /25
		{"10.6.1.0", ""},      // just past a /24
		{"10.4.2.0", ""},      // just past a /23
		{"9.255.255.255", ""}, // below every prefix
		{"10.40.0.0", ""},     // above every prefix
	}
	for _, tt := range tests {
		topo := base()
		topo.Hosts = append(topo.Hosts, Host{Name: "stray", IP: netip.MustParseAddr(tt.ip), Attach: Endpoint{"bare", 1}, NICGbps: 100})
		err := topo.Validate()
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("a host at %s on the leaf without a prefix: %v, want valid", tt.ip, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrInvalid)):
			t.Errorf("a host at %s on the leaf without a prefix: %v, want an error saying %q", tt.ip, err, tt.wantErr)
		}
	}
}

// TestSampledFlowsOrSrcPorts: an intent names its flows by source ports
// or asks for the sampled ones, exactly one of the two.
func TestSampledFlowsOrSrcPorts(t *testing.T) {
	base := IntentSpec{Name: "job", Src: "h1", Dst: "h2", Gbps: 10}
	for _, tc := range []struct {
		name  string
		spec  func(IntentSpec) IntentSpec
		field string // "" when valid
	}{
		{"ports", func(s IntentSpec) IntentSpec { s.SrcPorts = PortRange{First: 49152, Last: 49153}; return s }, ""},
		{"sampled", func(s IntentSpec) IntentSpec { s.SampledFlows = true; return s }, ""},
		{"neither", func(s IntentSpec) IntentSpec { return s }, "src_ports"},
		{"both", func(s IntentSpec) IntentSpec {
			s.SampledFlows, s.SrcPorts = true, PortRange{First: 49152, Last: 49152}
			return s
		}, "src_ports"},
	} {
		err := tc.spec(base).Validate()
		var v *ValidationError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.field != "" && (!errors.As(err, &v) || len(v.Errors) == 0 || v.Errors[0].Field != tc.field):
			t.Errorf("%s: %v, want an error on %s", tc.name, err, tc.field)
		}
	}
}
