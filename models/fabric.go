// Package models holds accelnet's domain types: the fabric (switches, links,
// hosts) and the forwarding state the controller programs into switches.
// It does no I/O; every type checks itself with Validate.
package models

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// ErrInvalid is wrapped by every validation error so callers can map it to
// "bad request" without string matching.
var ErrInvalid = errors.New("invalid")

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// SwitchID is a switch's unique name within a fabric, e.g. "leaf3".
type SwitchID string

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// Validate checks that the name is usable as an etcd key segment and a URL path element.
func (id SwitchID) Validate() error {
	if !nameRE.MatchString(string(id)) {
		return invalidf("switch name %q: want 1-63 characters of letters, digits, '.', '_' or '-'", string(id))
	}
	return nil
}

// Role is a switch's tier in the Clos.
type Role string

const (
	RoleLeaf  Role = "leaf"  // top-of-rack (fat-tree: edge); hosts attach here
	RoleSpine Role = "spine" // second tier of a leaf-spine; fat-tree aggregation switches are spines too
	RoleCore  Role = "core"  // fat-tree core tier
)

// Validate accepts the known roles only.
func (r Role) Validate() error {
	switch r {
	case RoleLeaf, RoleSpine, RoleCore:
		return nil
	}
	return invalidf("role %q: want leaf, spine or core", string(r))
}

// Switch is one programmable switch of the fabric.
type Switch struct {
	Name     SwitchID `json:"name"`
	Role     Role     `json:"role"`
	DeviceID uint64   `json:"device_id"`
	// P4RTAddr and GNMIAddr are host:port of the switch's P4Runtime and gNMI
	// servers. They may be empty in a topology that fabricsim will serve: it
	// fills them in.
	P4RTAddr string `json:"p4rt_addr,omitempty"`
	GNMIAddr string `json:"gnmi_addr,omitempty"`
	// Prefix is the subnet of the hosts under a leaf; routes toward the leaf
	// aggregate to it. Zero means "route to each host by /32".
	Prefix netip.Prefix `json:"prefix,omitzero"`
	// Pod groups switches of a fat-tree pod, for display and placement; 0 if none.
	Pod int `json:"pod,omitempty"`
	// Target is what runs the switch's pipeline, which decides the device
	// config pushed with the P4Info: TargetFabricsim (the default) or
	// TargetBMv2 (simple_switch_grpc: the BMv2 JSON).
	Target Target `json:"target,omitempty"`
}

// Target is a kind of P4Runtime switch.
type Target string

// Targets accelnet programs.
const (
	TargetFabricsim Target = "fabricsim"
	TargetBMv2      Target = "bmv2"
)

// Validate accepts the known targets ("" is fabricsim).
func (t Target) Validate() error {
	switch t {
	case "", TargetFabricsim, TargetBMv2:
		return nil
	}
	return invalidf("target %q: want fabricsim or bmv2", string(t))
}

// Validate checks the switch on its own; Topology.Validate checks it against the rest.
func (s Switch) Validate() error {
	if err := s.Name.Validate(); err != nil {
		return err
	}
	if err := s.Role.Validate(); err != nil {
		return fmt.Errorf("switch %s: %w", s.Name, err)
	}
	if s.DeviceID == 0 {
		return invalidf("switch %s: device_id must be non-zero", s.Name)
	}
	if err := s.Target.Validate(); err != nil {
		return fmt.Errorf("switch %s: %w", s.Name, err)
	}
	for _, a := range []struct{ field, addr string }{{"p4rt_addr", s.P4RTAddr}, {"gnmi_addr", s.GNMIAddr}} {
		if a.addr == "" {
			continue
		}
		if _, _, err := splitHostPort(a.addr); err != nil {
			return invalidf("switch %s: %s %q: %v", s.Name, a.field, a.addr, err)
		}
	}
	if s.Prefix.IsValid() {
		if !s.Prefix.Addr().Is4() {
			return invalidf("switch %s: prefix %s is not IPv4", s.Name, s.Prefix)
		}
		if s.Prefix != s.Prefix.Masked() {
			return invalidf("switch %s: prefix %s has host bits set (want %s)", s.Name, s.Prefix, s.Prefix.Masked())
		}
		if s.Role != RoleLeaf {
			return invalidf("switch %s: only leaves have a host prefix", s.Name)
		}
	}
	if s.Pod < 0 {
		return invalidf("switch %s: pod must not be negative", s.Name)
	}
	return nil
}

func splitHostPort(addr string) (string, int, error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return "", 0, errors.New("want host:port")
	}
	port, err := strconv.Atoi(addr[i+1:])
	if err != nil || port < 0 || port > 65535 {
		return "", 0, errors.New("port must be 0-65535")
	}
	return addr[:i], port, nil
}

// MaxPort is the largest port number a v1model pipeline can address (9-bit
// port, with 255 reserved for the CPU port by accelnet.p4).
const MaxPort = 511

// CPUPort is the port accelnet.p4 uses for packet-in/packet-out.
const CPUPort = 255

// Endpoint is one end of a link: a switch port.
type Endpoint struct {
	Switch SwitchID `json:"switch"`
	Port   uint32   `json:"port"`
}

func (e Endpoint) String() string {
	return string(e.Switch) + ":" + strconv.FormatUint(uint64(e.Port), 10)
}

// Validate checks the port is a usable front-panel port.
func (e Endpoint) Validate() error {
	if err := e.Switch.Validate(); err != nil {
		return err
	}
	if e.Port == 0 || e.Port > MaxPort || e.Port == CPUPort {
		return invalidf("port %s: want 1-%d, not %d (CPU port)", e, MaxPort, CPUPort)
	}
	return nil
}

// ParseEndpoint reads "switch:port".
func ParseEndpoint(s string) (Endpoint, error) {
	s = strings.TrimSpace(s)
	i := strings.LastIndexByte(s, ':')
	if i <= 0 {
		return Endpoint{}, invalidf("endpoint %q: want switch:port", s)
	}
	port, err := strconv.ParseUint(s[i+1:], 10, 32)
	if err != nil {
		return Endpoint{}, invalidf("endpoint %q: port is not a number", s)
	}
	e := Endpoint{Switch: SwitchID(s[:i]), Port: uint32(port)}
	return e, e.Validate()
}

// InterfaceName is the OpenConfig interface name of a switch port. fabricsim
// and the controller's gNMI client both use it to map counters to ports.
func InterfaceName(port uint32) string { return "eth" + strconv.FormatUint(uint64(port), 10) }

// PortFromInterface inverts InterfaceName.
func PortFromInterface(name string) (uint32, bool) {
	rest, ok := strings.CutPrefix(name, "eth")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(rest, 10, 32)
	if err != nil {
		return 0, false
	}
	return uint32(n), true
}

// LinkID names a link by its endpoints, lower endpoint first, so both
// directions of a cable have one ID.
type LinkID string

// Ends parses the ID back into its endpoints ("leaf1:5<->spine1:1").
func (id LinkID) Ends() (Endpoint, Endpoint, error) {
	a, b, ok := strings.Cut(string(id), "<->")
	if !ok {
		return Endpoint{}, Endpoint{}, invalidf("link %q: want switch:port<->switch:port", string(id))
	}
	ea, err := ParseEndpoint(a)
	if err != nil {
		return Endpoint{}, Endpoint{}, err
	}
	eb, err := ParseEndpoint(b)
	return ea, eb, err
}

// Link is a full-duplex cable between two switch ports.
type Link struct {
	A    Endpoint `json:"a"`
	B    Endpoint `json:"b"`
	Gbps float64  `json:"gbps"`
}

// ID returns the canonical name of the link.
func (l Link) ID() LinkID {
	a, b := l.A.String(), l.B.String()
	if b < a {
		a, b = b, a
	}
	return LinkID(a + "<->" + b)
}

// Validate checks the link on its own.
func (l Link) Validate() error {
	if err := l.A.Validate(); err != nil {
		return err
	}
	if err := l.B.Validate(); err != nil {
		return err
	}
	if l.A.Switch == l.B.Switch {
		return invalidf("link %s: both ends on the same switch", l.ID())
	}
	if !(l.Gbps > 0) || l.Gbps > 1e6 {
		return invalidf("link %s: gbps must be in (0, 1e6], got %v", l.ID(), l.Gbps)
	}
	return nil
}

// Host is a GPU server NIC attached to a leaf port.
type Host struct {
	Name    string     `json:"name"`
	IP      netip.Addr `json:"ip"`
	Attach  Endpoint   `json:"attach"`
	NICGbps float64    `json:"nic_gbps"`
	// Rail is the GPU's local rank in a rail-optimized fabric (1-based;
	// 0 when the fabric has no rails). Collectives run one ring per rail.
	Rail int `json:"rail,omitempty"`
	// MAC is the NIC's Ethernet address, the destination its leaf writes
	// into routed packets; zero: derived from the IP (see NICMAC).
	MAC MAC `json:"mac,omitzero"`
}

// NICMAC is the host NIC's MAC: the one the topology gives, else
// 06:00 and the four bytes of its IPv4 address (locally administered,
// never one of a switch port's: see Switch.PortMAC).
func (h Host) NICMAC() MAC {
	if !h.MAC.IsZero() {
		return h.MAC
	}
	a := h.IP.As4()
	return MAC{0x06, 0x00, a[0], a[1], a[2], a[3]}
}

// PortMAC is the MAC of one of the switch's ports: 02, the low 24 bits
// of its device ID, the port number (locally administered addresses a
// controller may assign; BMv2 and fabricsim take whatever the tables
// say).
func (sw Switch) PortMAC(port uint32) MAC {
	d := sw.DeviceID
	return MAC{0x02, byte(d >> 16), byte(d >> 8), byte(d), byte(port >> 8), byte(port)}
}

// Validate checks the host on its own.
func (h Host) Validate() error {
	if !nameRE.MatchString(h.Name) {
		return invalidf("host name %q: want 1-63 characters of letters, digits, '.', '_' or '-'", h.Name)
	}
	if !h.IP.Is4() {
		return invalidf("host %s: ip must be IPv4", h.Name)
	}
	if err := h.Attach.Validate(); err != nil {
		return fmt.Errorf("host %s: %w", h.Name, err)
	}
	if !(h.NICGbps > 0) || h.NICGbps > 1e6 {
		return invalidf("host %s: nic_gbps must be in (0, 1e6], got %v", h.Name, h.NICGbps)
	}
	if h.Rail < 0 {
		return invalidf("host %s: rail must not be negative", h.Name)
	}
	return nil
}

// Topology is the desired shape of a fabric, as stored in etcd and written in
// topology files.
type Topology struct {
	Name     string   `json:"name,omitempty"`
	Switches []Switch `json:"switches"`
	Links    []Link   `json:"links"`
	Hosts    []Host   `json:"hosts"`
}

// Validate checks every part and their consistency: unique names, device
// IDs, ports and addresses; links and hosts on known switches; hosts on
// leaves, inside the leaf's prefix.
func (t Topology) Validate() error {
	if len(t.Switches) == 0 {
		return invalidf("topology has no switches")
	}
	switches := make(map[SwitchID]Switch, len(t.Switches))
	devices := make(map[uint64]SwitchID, len(t.Switches))
	for _, s := range t.Switches {
		if err := s.Validate(); err != nil {
			return err
		}
		if _, dup := switches[s.Name]; dup {
			return invalidf("switch %s: defined twice", s.Name)
		}
		if other, dup := devices[s.DeviceID]; dup {
			return invalidf("switch %s: device_id %d already used by %s", s.Name, s.DeviceID, other)
		}
		switches[s.Name] = s
		devices[s.DeviceID] = s.Name
	}
	used := make(map[Endpoint]string, 2*len(t.Links)+len(t.Hosts))
	claim := func(e Endpoint, by string) error {
		if _, ok := switches[e.Switch]; !ok {
			return invalidf("%s: unknown switch %q", by, e.Switch)
		}
		if other, dup := used[e]; dup {
			return invalidf("%s: port %s already used by %s", by, e, other)
		}
		used[e] = by
		return nil
	}
	for _, l := range t.Links {
		if err := l.Validate(); err != nil {
			return err
		}
		by := "link " + string(l.ID())
		if err := claim(l.A, by); err != nil {
			return err
		}
		if err := claim(l.B, by); err != nil {
			return err
		}
	}
	hostNames := make(map[string]bool, len(t.Hosts))
	hostIPs := make(map[netip.Addr]string, len(t.Hosts))
	hostLeaf := make(map[string]SwitchID, len(t.Hosts))
	for _, h := range t.Hosts {
		if err := h.Validate(); err != nil {
			return err
		}
		if hostNames[h.Name] {
			return invalidf("host %s: defined twice", h.Name)
		}
		if other, dup := hostIPs[h.IP]; dup {
			return invalidf("host %s: ip %s already used by %s", h.Name, h.IP, other)
		}
		hostNames[h.Name] = true
		hostIPs[h.IP] = h.Name
		hostLeaf[h.Name] = h.Attach.Switch
		if err := claim(h.Attach, "host "+h.Name); err != nil {
			return err
		}
		leaf := switches[h.Attach.Switch]
		if leaf.Role != RoleLeaf {
			return invalidf("host %s: attached to %s, which is a %s, not a leaf", h.Name, leaf.Name, leaf.Role)
		}
		if leaf.Prefix.IsValid() && !leaf.Prefix.Contains(h.IP) {
			return invalidf("host %s: ip %s is outside %s's prefix %s", h.Name, h.IP, leaf.Name, leaf.Prefix)
		}
	}
	return t.checkPrefixes(hostIPs, hostLeaf)
}

// checkPrefixes checks that no two leaves' prefixes overlap and that no
// host has an address inside another leaf's prefix than its own.
func (t Topology) checkPrefixes(hostIPs map[netip.Addr]string, hostLeaf map[string]SwitchID) error {
	type leafPrefix struct {
		p    netip.Prefix
		leaf SwitchID
	}
	var prefixes []leafPrefix
	for _, s := range t.Switches {
		if !s.Prefix.IsValid() {
			continue
		}
		for _, o := range prefixes {
			if o.p.Overlaps(s.Prefix) {
				return invalidf("switch %s: prefix %s overlaps %s of %s", s.Name, s.Prefix, o.p, o.leaf)
			}
		}
		prefixes = append(prefixes, leafPrefix{s.Prefix, s.Name})
	}
	// No two overlap (and each is masked), so the one prefix that can hold
	// an address is the last to start at or before it: a binary search,
	// not a look at every prefix for every host (at k=48 27,648 × 1,152,
	// 0.5 s of every start's and topology change's CPU).
	slices.SortFunc(prefixes, func(a, b leafPrefix) int { return a.p.Addr().Compare(b.p.Addr()) })
	for ip, h := range hostIPs {
		i, found := slices.BinarySearchFunc(prefixes, ip, func(lp leafPrefix, ip netip.Addr) int { return lp.p.Addr().Compare(ip) })
		if !found {
			i--
		}
		if i < 0 {
			continue
		}
		if lp := prefixes[i]; lp.p.Contains(ip) && hostLeaf[h] != lp.leaf {
			return invalidf("host %s: ip %s is inside %s's prefix %s but attached elsewhere", h, ip, lp.leaf, lp.p)
		}
	}
	return nil
}

// InterfaceConfig is the part of a port's OpenConfig configuration the
// controller manages (/interfaces/interface/config).
type InterfaceConfig struct {
	Enabled     bool   `json:"enabled"`
	MTU         uint16 `json:"mtu"`
	Description string `json:"description"`
}
