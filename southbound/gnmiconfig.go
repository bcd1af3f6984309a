package southbound

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	gnmipb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound/ocpath"
)

// GNMIConfig reads and writes interface configuration over gNMI Get and
// Set (OpenConfig /interfaces/interface[name]/config), and reads LLDP
// neighbours, over one connection per switch kept between calls: a
// controller reads every switch's configuration at each resync and its
// neighbours every few seconds, and a connection per call cost a TCP and
// HTTP/2 (and TLS) handshake at both ends each time. A call that fails
// for want of the switch drops its connection, so the next one dials
// afresh rather than waiting out gRPC's reconnect backoff.
type GNMIConfig struct {
	// Resolve finds a switch's gNMI address.
	Resolve func(models.SwitchID) (models.Switch, error)
	// Dialer sets TLS and RPC metrics and shares a switch's connection
	// with P4Runtime; nil: plaintext, no metrics, a connection of its own.
	Dialer *Dialer

	// election is the ID SetElectionID gave, sent with every Set as gNMI
	// master arbitration once arbitrate is set.
	election  atomic.Uint64
	arbitrate atomic.Bool

	mu    sync.Mutex
	conns map[models.SwitchID]*gnmiConn
}

// gnmiConn is a switch's connection and what was learnt on it of the
// target: the encoding its Capabilities offer, whether it answers a Get
// of the config leaves.
type gnmiConn struct {
	addr    string
	cc      *grpc.ClientConn
	release func() // gives cc back to the Dialer

	mu    sync.Mutex
	enc   gnmipb.Encoding
	known bool // enc was answered by the target's Capabilities
	// wholeTree: the target refused a Get of the config leaves alone, so
	// GetConfig asks for the whole interfaces subtree.
	wholeTree atomic.Bool
}

// encoding returns the encoding negotiated on the connection, asking the
// target's Capabilities until it has answered once. The lock is not held
// over the RPC: a slow target does not hold up the calls that need no
// answer from it (two asking at once both ask).
func (c *gnmiConn) encoding(ctx context.Context) gnmipb.Encoding {
	c.mu.Lock()
	if c.known {
		defer c.mu.Unlock()
		return c.enc
	}
	c.mu.Unlock()
	enc, err := capabilityEncoding(ctx, c.cc)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.known {
		c.enc, c.known = enc, err == nil
	}
	return c.enc
}

// SetElectionID sets the election ID sent with every Set as gNMI master
// arbitration (the leader's term, as the P4Runtime driver's), so a target
// refuses a deposed leader's writes. Zero means this replica does not
// lead: Set is refused locally. Until it is first called, Sets carry no
// arbitration (a controller without leader election).
func (g *GNMIConfig) SetElectionID(id uint64) {
	g.election.Store(id)
	g.arbitrate.Store(true)
}

// conn returns the switch's connection, dialing one if it has none or
// its address changed.
func (g *GNMIConfig) conn(id models.SwitchID) (*gnmiConn, models.Switch, error) {
	sw, err := g.Resolve(id)
	if err != nil {
		return nil, sw, err
	}
	if sw.GNMIAddr == "" {
		return nil, sw, fmt.Errorf("%w: %s has no gNMI address", ErrUnavailable, id)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if c := g.conns[id]; c != nil {
		if c.addr == sw.GNMIAddr {
			return c, sw, nil
		}
		c.release()
		delete(g.conns, id)
	}
	cc, release, err := g.Dialer.Conn(sw.GNMIAddr)
	if err != nil {
		return nil, sw, fmt.Errorf("%w: gnmi %s: %v", ErrUnavailable, id, err)
	}
	if g.conns == nil {
		g.conns = map[models.SwitchID]*gnmiConn{}
	}
	c := &gnmiConn{addr: sw.GNMIAddr, cc: cc, release: release}
	g.conns[id] = c
	return c, sw, nil
}

// done drops c if err says the switch could not be reached: the next
// call dials again. (A call out of time or cancelled keeps it: the
// switch may be slow, and other calls may be using it.)
func (g *GNMIConfig) done(id models.SwitchID, c *gnmiConn, err error) {
	if status.Code(err) != codes.Unavailable {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.conns[id] == c {
		c.release()
		delete(g.conns, id)
	}
}

// Close closes every switch's connection; a later call dials again.
func (g *GNMIConfig) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for id, c := range g.conns {
		c.release()
		delete(g.conns, id)
	}
}

// GetConfig returns every interface's managed configuration by port. It
// asks for the managed config leaves of every interface (Get CONFIG,
// PROTO); a target that refuses that (gnxi's answers only type ALL in
// JSON, and no wildcard keys) is asked for the whole /interfaces subtree
// in the encoding its Capabilities offer instead.
func (g *GNMIConfig) GetConfig(ctx context.Context, id models.SwitchID) (map[uint32]models.InterfaceConfig, error) {
	c, sw, err := g.conn(id)
	if err != nil {
		return nil, err
	}
	var ans []byte
	if !c.wholeTree.Load() {
		ans, err = getRaw(ctx, c.cc, &gnmipb.GetRequest{
			Prefix: &gnmipb.Path{Target: string(sw.Name)},
			// The three leaves managed, not the whole container: a real
			// target's holds a dozen more.
			Path: []*gnmipb.Path{ocpath.InterfaceConfig("*", "enabled"), ocpath.InterfaceConfig("*", "mtu"),
				ocpath.InterfaceConfig("*", "description")},
			Type:     gnmipb.GetRequest_CONFIG,
			Encoding: gnmipb.Encoding_PROTO,
		})
		if code := status.Code(err); code == codes.Unimplemented || code == codes.InvalidArgument || code == codes.NotFound {
			c.wholeTree.Store(true) // asked again only on a new connection
		}
	}
	if c.wholeTree.Load() {
		ans, err = getRaw(ctx, c.cc, &gnmipb.GetRequest{
			Prefix:   &gnmipb.Path{Target: string(sw.Name)},
			Path:     []*gnmipb.Path{{Elem: []*gnmipb.PathElem{{Name: "interfaces"}}}},
			Type:     gnmipb.GetRequest_ALL,
			Encoding: c.encoding(ctx),
		})
	}
	if err != nil {
		g.done(id, c, err)
		return nil, mapStatus("gnmi get config of "+string(id), err)
	}
	out, err := decodeConfig(ans, true)
	if err != nil {
		return nil, fmt.Errorf("gnmi get config of %s: %w", id, err)
	}
	return out, nil
}

// decodeConfig reads the interfaces' managed configuration in a
// GetResponse, from the wire where it can (wire; readGet).
func decodeConfig(b []byte, wire bool) (map[uint32]models.InterfaceConfig, error) {
	out := map[uint32]models.InterfaceConfig{}
	// interfaces/interface[name]/config/<leaf>
	take := func(l leafView) {
		if l.Len() != 4 || !l.NameIs(1, "interface") || !l.NameIs(2, "config") {
			return
		}
		port, ok := models.PortFromInterface(l.Key(1, "name"))
		if !ok {
			return
		}
		c := out[port]
		switch {
		case l.NameIs(3, "enabled"):
			c.Enabled, _ = l.Bool()
		case l.NameIs(3, "mtu"):
			mtu, _ := l.Uint()
			c.MTU = uint16(mtu)
		case l.NameIs(3, "description"):
			c.Description, _ = l.String()
		}
		out[port] = c
	}
	if err := readGet(b, wire, func() { clear(out) }, take); err != nil {
		return nil, err
	}
	return out, nil
}

// LLDPNeighbor is what a port's LLDP agent hears: the neighbour's system
// name and port (OpenConfig's lldp model).
type LLDPNeighbor struct {
	SystemName string
	PortID     string
}

// ErrNoLLDP means a target serves no OpenConfig LLDP state.
var ErrNoLLDP = errors.New("no LLDP state served")

// LLDPNeighbors reads /lldp/interfaces/interface[*]/neighbors: each local
// port's neighbours as the switch's own LLDP agent saw them. A target
// that does not serve the model answers ErrNoLLDP.
func (g *GNMIConfig) LLDPNeighbors(ctx context.Context, id models.SwitchID) (map[uint32][]LLDPNeighbor, error) {
	c, sw, err := g.conn(id)
	if err != nil {
		return nil, err
	}
	ans, err := getRaw(ctx, c.cc, &gnmipb.GetRequest{
		Prefix:   &gnmipb.Path{Target: string(sw.Name)},
		Path:     []*gnmipb.Path{{Elem: []*gnmipb.PathElem{{Name: "lldp"}, {Name: "interfaces"}}}},
		Type:     gnmipb.GetRequest_STATE,
		Encoding: c.encoding(ctx),
	})
	if c := status.Code(err); c == codes.NotFound || c == codes.Unimplemented || c == codes.InvalidArgument {
		return nil, fmt.Errorf("%w by %s: %v", ErrNoLLDP, id, err)
	}
	if err != nil {
		g.done(id, c, err)
		return nil, mapStatus("gnmi get lldp of "+string(id), err)
	}
	nbs, err := decodeLLDP(ans, true)
	if err != nil {
		return nil, fmt.Errorf("gnmi get lldp of %s: %w", id, err)
	}
	return nbs, nil
}

// decodeLLDP reads the neighbours in a GetResponse of /lldp/interfaces,
// from the wire where it can (wire), else through the generated messages.
func decodeLLDP(b []byte, wire bool) (map[uint32][]LLDPNeighbor, error) {
	type key struct {
		port uint32
		id   string
	}
	found := map[key]*LLDPNeighbor{}
	// lldp/interfaces/interface[name]/neighbors/neighbor[id]/state/<leaf>
	take := func(l leafView) {
		if l.Len() != 7 || !l.NameIs(2, "interface") || !l.NameIs(4, "neighbor") || !l.NameIs(5, "state") {
			return
		}
		port, ok := models.PortFromInterface(l.Key(2, "name"))
		if !ok {
			return
		}
		k := key{port, l.Key(4, "id")}
		nb := found[k]
		if nb == nil {
			nb = &LLDPNeighbor{}
			found[k] = nb
		}
		v, _ := l.String()
		switch {
		case l.NameIs(6, "system-name"):
			nb.SystemName = v
		case l.NameIs(6, "port-id"):
			nb.PortID = v
		}
	}
	if err := readGet(b, wire, func() { clear(found) }, take); err != nil {
		return nil, err
	}
	out := map[uint32][]LLDPNeighbor{}
	for k, nb := range found {
		out[k.port] = append(out[k.port], *nb)
	}
	return out, nil
}

// setPaths holds, by port, the paths of the three leaves SetConfig sets
// (enabled, mtu, description): built once, shared by every Set (a message
// is only read while it is sent). At k=48 a cold start sets 414,720
// leaves: building their paths afresh would be 1.4% of the controller's
// CPU.
var setPaths sync.Map // uint32 → *[3]*gnmipb.Path

func configPaths(port uint32) *[3]*gnmipb.Path {
	if p, ok := setPaths.Load(port); ok {
		return p.(*[3]*gnmipb.Path)
	}
	name := models.InterfaceName(port)
	p := &[3]*gnmipb.Path{ocpath.InterfaceConfig(name, "enabled"), ocpath.InterfaceConfig(name, "mtu"), ocpath.InterfaceConfig(name, "description")}
	got, _ := setPaths.LoadOrStore(port, p)
	return got.(*[3]*gnmipb.Path)
}

// SetConfig writes the given ports' configuration in one Set (the target
// applies it all or nothing).
func (g *GNMIConfig) SetConfig(ctx context.Context, id models.SwitchID, ports map[uint32]models.InterfaceConfig) error {
	if len(ports) == 0 {
		return nil
	}
	var ext []*gnmi_ext.Extension
	if g.arbitrate.Load() {
		eid := g.election.Load()
		if eid == 0 {
			return fmt.Errorf("%w: gnmi set config of %s: this replica is not the leader", models.ErrNotPrimary, id)
		}
		ext = append(ext, &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_MasterArbitration{MasterArbitration: &gnmi_ext.MasterArbitration{
			Role: &gnmi_ext.Role{Id: "accelnet"}, ElectionId: &gnmi_ext.Uint128{Low: eid},
		}}})
	}
	c, sw, err := g.conn(id)
	if err != nil {
		return err
	}
	req := &gnmipb.SetRequest{Prefix: &gnmipb.Path{Target: string(sw.Name)}, Extension: ext}
	for port, cfg := range ports {
		paths := configPaths(port)
		req.Update = append(req.Update,
			&gnmipb.Update{Path: paths[0], Val: &gnmipb.TypedValue{Value: &gnmipb.TypedValue_BoolVal{BoolVal: cfg.Enabled}}},
			&gnmipb.Update{Path: paths[1], Val: &gnmipb.TypedValue{Value: &gnmipb.TypedValue_UintVal{UintVal: uint64(cfg.MTU)}}},
			&gnmipb.Update{Path: paths[2], Val: &gnmipb.TypedValue{Value: &gnmipb.TypedValue_StringVal{StringVal: cfg.Description}}},
		)
	}
	if err := c.cc.Invoke(ctx, gnmipb.GNMI_Set_FullMethodName, req, nil, grpc.ForceCodec(unreadCodec{})); err != nil {
		g.done(id, c, err)
		return mapStatus("gnmi set config of "+string(id), err)
	}
	return nil
}
