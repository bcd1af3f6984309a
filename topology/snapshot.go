// Package topology is the fabric graph: immutable, indexed snapshots of a
// models.Topology, builders for standard Clos shapes, and the topology file
// format shared by the controller and fabricsim.
package topology

import (
	"errors"
	"fmt"
	"iter"
	"net/netip"
	"slices"

	"github.com/accelnet/accelnet/models"
)

// ErrNotFound is returned for lookups of switches, hosts or links that the
// snapshot does not have.
var ErrNotFound = errors.New("not in the topology")

// Adjacency is one link seen from one of its ends.
type Adjacency struct {
	Link      models.LinkID
	LocalPort uint32
	Peer      models.SwitchID
	PeerPort  uint32
	Gbps      float64
}

// Snapshot is an immutable, validated view of a fabric with indexes for the
// lookups routing needs. Accessors return copies; a Snapshot is safe for
// concurrent use.
type Snapshot struct {
	spec       models.Topology
	switchIdx  map[models.SwitchID]int
	hostIdx    map[string]int
	hostByIP   map[netip.Addr]int
	linkIdx    map[models.LinkID]int
	adj        map[models.SwitchID][]Adjacency
	atPort     map[models.Endpoint]models.LinkID
	hostAtPort map[models.Endpoint]int
	hostsOn    map[models.SwitchID][]int
	fabric     []int // the links between switches, by index in spec.Links
}

// New validates t and indexes it. The snapshot keeps its own copy of t.
func New(t models.Topology) (*Snapshot, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	t = clone(t)
	s := &Snapshot{
		spec:       t,
		switchIdx:  make(map[models.SwitchID]int, len(t.Switches)),
		hostIdx:    make(map[string]int, len(t.Hosts)),
		hostByIP:   make(map[netip.Addr]int, len(t.Hosts)),
		linkIdx:    make(map[models.LinkID]int, len(t.Links)),
		adj:        make(map[models.SwitchID][]Adjacency, len(t.Switches)),
		atPort:     make(map[models.Endpoint]models.LinkID, 2*len(t.Links)),
		hostAtPort: make(map[models.Endpoint]int, len(t.Hosts)),
		hostsOn:    make(map[models.SwitchID][]int),
	}
	for i, sw := range t.Switches {
		s.switchIdx[sw.Name] = i
	}
	for i, l := range t.Links {
		id := l.ID()
		if _, dup := s.linkIdx[id]; dup {
			return nil, fmt.Errorf("%w: link %s defined twice", models.ErrInvalid, id)
		}
		s.linkIdx[id] = i
		s.atPort[l.A] = id
		s.atPort[l.B] = id
		s.adj[l.A.Switch] = append(s.adj[l.A.Switch], Adjacency{Link: id, LocalPort: l.A.Port, Peer: l.B.Switch, PeerPort: l.B.Port, Gbps: l.Gbps})
		s.adj[l.B.Switch] = append(s.adj[l.B.Switch], Adjacency{Link: id, LocalPort: l.B.Port, Peer: l.A.Switch, PeerPort: l.A.Port, Gbps: l.Gbps})
	}
	for sw := range s.adj {
		slices.SortFunc(s.adj[sw], func(a, b Adjacency) int { return int(a.LocalPort) - int(b.LocalPort) })
	}
	for i, h := range t.Hosts {
		s.hostIdx[h.Name] = i
		s.hostByIP[h.IP] = i
		s.hostAtPort[h.Attach] = i
		s.hostsOn[h.Attach.Switch] = append(s.hostsOn[h.Attach.Switch], i)
	}
	for i, l := range t.Links {
		_, a := s.hostAtPort[l.A]
		_, b := s.hostAtPort[l.B]
		if !a && !b {
			s.fabric = append(s.fabric, i)
		}
	}
	return s, nil
}

func clone(t models.Topology) models.Topology {
	return models.Topology{
		Name:     t.Name,
		Switches: slices.Clone(t.Switches),
		Links:    slices.Clone(t.Links),
		Hosts:    slices.Clone(t.Hosts),
	}
}

// Spec returns a copy of the topology the snapshot was built from.
func (s *Snapshot) Spec() models.Topology { return clone(s.spec) }

// Name is the fabric's name.
func (s *Snapshot) Name() string { return s.spec.Name }

// Switches returns all switches in file order.
func (s *Snapshot) Switches() []models.Switch { return slices.Clone(s.spec.Switches) }

// AllSwitches yields every switch in file order without copying the list
// (for loops that run often: a k=48 fabric's is 2,880 switches).
func (s *Snapshot) AllSwitches() iter.Seq[models.Switch] {
	return func(yield func(models.Switch) bool) {
		for _, sw := range s.spec.Switches {
			if !yield(sw) {
				return
			}
		}
	}
}

// NumSwitches is how many switches the topology has.
func (s *Snapshot) NumSwitches() int { return len(s.spec.Switches) }

// Links returns all links in file order.
func (s *Snapshot) Links() []models.Link { return slices.Clone(s.spec.Links) }

// FabricLinks returns the links between switches (no host attachment), in
// file order.
func (s *Snapshot) FabricLinks() []models.Link {
	out := make([]models.Link, 0, len(s.fabric))
	for l := range s.AllFabricLinks() {
		out = append(out, l)
	}
	return out
}

// NumFabricLinks is how many links join two switches.
func (s *Snapshot) NumFabricLinks() int { return len(s.fabric) }

// AllFabricLinks yields the links between switches in file order without
// copying them into a list.
func (s *Snapshot) AllFabricLinks() iter.Seq[models.Link] {
	return func(yield func(models.Link) bool) {
		for _, i := range s.fabric {
			if !yield(s.spec.Links[i]) {
				return
			}
		}
	}
}

// Hosts returns all hosts in file order.
func (s *Snapshot) Hosts() []models.Host { return slices.Clone(s.spec.Hosts) }

// AllHosts yields every host in file order without copying the list (for
// loops that run often: a k=48 fabric's is 27,648 hosts).
func (s *Snapshot) AllHosts() iter.Seq[models.Host] { return slices.Values(s.spec.Hosts) }

// AllLinks yields every link in file order without copying the list.
func (s *Snapshot) AllLinks() iter.Seq[models.Link] { return slices.Values(s.spec.Links) }

// Switch looks a switch up by name.
func (s *Snapshot) Switch(id models.SwitchID) (models.Switch, error) {
	i, ok := s.switchIdx[id]
	if !ok {
		return models.Switch{}, fmt.Errorf("switch %q: %w", id, ErrNotFound)
	}
	return s.spec.Switches[i], nil
}

// Host looks a host up by name.
func (s *Snapshot) Host(name string) (models.Host, error) {
	i, ok := s.hostIdx[name]
	if !ok {
		return models.Host{}, fmt.Errorf("host %q: %w", name, ErrNotFound)
	}
	return s.spec.Hosts[i], nil
}

// HostByIP looks a host up by address.
func (s *Snapshot) HostByIP(ip netip.Addr) (models.Host, error) {
	i, ok := s.hostByIP[ip]
	if !ok {
		return models.Host{}, fmt.Errorf("host with ip %s: %w", ip, ErrNotFound)
	}
	return s.spec.Hosts[i], nil
}

// Link looks a link up by ID.
func (s *Snapshot) Link(id models.LinkID) (models.Link, error) {
	i, ok := s.linkIdx[id]
	if !ok {
		return models.Link{}, fmt.Errorf("link %q: %w", id, ErrNotFound)
	}
	return s.spec.Links[i], nil
}

// LinkAt returns the link plugged into a switch port.
func (s *Snapshot) LinkAt(e models.Endpoint) (models.Link, bool) {
	id, ok := s.atPort[e]
	if !ok {
		return models.Link{}, false
	}
	return s.spec.Links[s.linkIdx[id]], true
}

// HostAt returns the host plugged into a leaf port.
func (s *Snapshot) HostAt(e models.Endpoint) (models.Host, bool) {
	i, ok := s.hostAtPort[e]
	if !ok {
		return models.Host{}, false
	}
	return s.spec.Hosts[i], true
}

// Neighbors returns the switch's links in port order.
func (s *Snapshot) Neighbors(id models.SwitchID) []Adjacency { return slices.Clone(s.adj[id]) }

// EachNeighbor calls fn with each of the switch's links in port order,
// without copying them (for hot loops such as a BFS per destination).
func (s *Snapshot) EachNeighbor(id models.SwitchID, fn func(Adjacency)) {
	for _, a := range s.adj[id] {
		fn(a)
	}
}

// HostsOn returns the hosts attached to a leaf, in file order.
func (s *Snapshot) HostsOn(leaf models.SwitchID) []models.Host {
	idx := s.hostsOn[leaf]
	out := make([]models.Host, len(idx))
	for i, j := range idx {
		out[i] = s.spec.Hosts[j]
	}
	return out
}

// Ports returns every connected port of a switch (to links or hosts), sorted.
func (s *Snapshot) Ports(id models.SwitchID) []uint32 {
	var ports []uint32
	for _, a := range s.adj[id] {
		ports = append(ports, a.LocalPort)
	}
	for _, j := range s.hostsOn[id] {
		ports = append(ports, s.spec.Hosts[j].Attach.Port)
	}
	slices.Sort(ports)
	return ports
}

// PortGbps is the speed of whatever is plugged into a port: the link's, or
// the attached host NIC's. Zero if the port is unused.
func (s *Snapshot) PortGbps(e models.Endpoint) float64 {
	if l, ok := s.LinkAt(e); ok {
		return l.Gbps
	}
	if h, ok := s.HostAt(e); ok {
		return h.NICGbps
	}
	return 0
}
