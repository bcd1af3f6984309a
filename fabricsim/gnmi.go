package fabricsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	gpath "github.com/openconfig/gnmi/path"
	gnmipb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"github.com/openconfig/ygot/ytypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/models/oc"
	"github.com/accelnet/accelnet/southbound/ocpath"
)

// gnmiServer serves one switch's OpenConfig interfaces. Status,
// configuration and LLDP leaves are held per port (portLeaves: each
// leaf's value and when it took it), refreshed every counter interval
// with the values that changed, each change sent to the ON_CHANGE
// subscriptions whose paths cover it. Counters, which change at every
// tick, are kept as the last tick's sample and read from it by Get and
// Subscribe alike (setCounters). Notifications are made when asked for.
//
// The leaves are not held in the gnmi module's cache: a tree node, a
// path string and a cloned notification per leaf would be, for 2.35
// million leaves at k=48, a third of the emulator's heap (0.87 GB) for
// its collector to mark every cycle, 4-5 s of a core while the
// controller's writes wait. Subscribe is implemented here rather than with the gnmi
// module's subscribe server, which streams every cache update regardless
// of mode and ignores sample_interval and heartbeats.
type gnmiServer struct {
	gnmipb.UnimplementedGNMIServer
	sw        *Switch
	prefix    *gnmipb.Path // the switch as target: every notification's prefix
	minSample time.Duration

	mu     sync.Mutex
	config map[uint32]ifConfig
	// leaves are the published leaves by port, ports the ports with
	// some, in order.
	leaves map[uint32]*portLeaves
	ports  []uint32
	// counters are the ports' counters at the last tick (see
	// counterNotifications); watchers are the ON_CHANGE subscriptions'
	// paths, by subscriber.
	counters counterSample
	watchers map[*subscriber][][]string
	// master is the highest master-arbitration election ID a Set carried:
	// Sets with a lower one are refused, fencing out a deposed controller.
	master *gnmi_ext.Uint128
}

// arbitrate applies gNMI master arbitration (the gnmi_ext extension) to
// a Set: a lower election ID than the highest seen is PERMISSION_DENIED.
func (g *gnmiServer) arbitrate(exts []*gnmi_ext.Extension) error {
	for _, e := range exts {
		ma := e.GetMasterArbitration()
		if ma == nil {
			continue
		}
		id := ma.GetElectionId()
		if id == nil {
			return status.Error(codes.InvalidArgument, "master arbitration without an election_id")
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.master != nil && (id.GetHigh() < g.master.GetHigh() || id.GetHigh() == g.master.GetHigh() && id.GetLow() < g.master.GetLow()) {
			return status.Errorf(codes.PermissionDenied, "election id %d is lower than the master's %d", id.GetLow(), g.master.GetLow())
		}
		g.master = &gnmi_ext.Uint128{High: id.GetHigh(), Low: id.GetLow()}
	}
	return nil
}

// ifConfig is an interface's configuration, settable over gNMI.
type ifConfig struct {
	Enabled     bool
	MTU         uint16
	Description string
}

func defaultConfig() ifConfig { return ifConfig{Enabled: true, MTU: 9100} }

func newGNMIServer(sw *Switch, minSample time.Duration) *gnmiServer {
	return &gnmiServer{
		sw:        sw,
		prefix:    &gnmipb.Path{Target: string(sw.name)},
		minSample: minSample,
		config:    map[uint32]ifConfig{},
		leaves:    map[uint32]*portLeaves{},
	}
}

func (g *gnmiServer) ifConfig(port uint32) ifConfig {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.config[port]; ok {
		return c
	}
	return defaultConfig()
}

func (g *gnmiServer) Capabilities(context.Context, *gnmipb.CapabilityRequest) (*gnmipb.CapabilityResponse, error) {
	return &gnmipb.CapabilityResponse{
		SupportedModels: []*gnmipb.ModelData{
			{Name: "openconfig-interfaces", Organization: "OpenConfig working group", Version: "2.0.0"},
			{Name: "openconfig-if-ethernet", Organization: "OpenConfig working group", Version: "2.0.0"},
		},
		SupportedEncodings: []gnmipb.Encoding{gnmipb.Encoding_JSON, gnmipb.Encoding_JSON_IETF, gnmipb.Encoding_PROTO},
		GNMIVersion:        "0.10.0",
	}, nil
}

// interfacePath is /interfaces/interface[name=N]/<leaf...>.
func interfacePath(name string, leaf ...string) *gnmipb.Path {
	p := &gnmipb.Path{Elem: []*gnmipb.PathElem{
		{Name: "interfaces"},
		{Name: "interface", Key: map[string]string{"name": name}},
	}}
	for _, l := range leaf {
		p.Elem = append(p.Elem, &gnmipb.PathElem{Name: l})
	}
	return p
}

// rdmaQueue names the egress queue of the lossless RDMA class (the only
// one fabricsim models).
const rdmaQueue = "RDMA"

func uintVal(v uint64) *gnmipb.TypedValue {
	return &gnmipb.TypedValue{Value: &gnmipb.TypedValue_UintVal{UintVal: v}}
}

func strVal(s string) *gnmipb.TypedValue {
	return &gnmipb.TypedValue{Value: &gnmipb.TypedValue_StringVal{StringVal: s}}
}

func boolVal(b bool) *gnmipb.TypedValue {
	return &gnmipb.TypedValue{Value: &gnmipb.TypedValue_BoolVal{BoolVal: b}}
}

// publishOper publishes one port's oper-status alone, if it changed.
func (g *gnmiServer) publishOper(ts int64, port uint32, operUp bool) error {
	a := portAddrs(port)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.setLocked(ts, g.portLocked(port), a, operStatusLeaf, upDownVal(operUp)) {
		return fmt.Errorf("gnmi update for %s %s oper-status: %w", g.sw.name, a.name.GetStringVal(), errStale)
	}
	return nil
}

// lldpLeaves are the LLDP neighbour leaves published for a port.
var lldpLeaves = [...]string{"system-name", "port-id", "port-id-type", "chassis-id", "chassis-id-type"}

// publishLLDP publishes what a port's LLDP agent hears (OpenConfig's
// lldp model): the switch the port is cabled to, its interface and MAC —
// the cabling as it really is (swapped cables included), if it changed.
func (g *gnmiServer) publishLLDP(ts int64, port uint32, peer models.Switch, peerPort uint32) error {
	a := portAddrs(port)
	vals := [len(lldpLeaves)]string{string(peer.Name), models.InterfaceName(peerPort), "INTERFACE_NAME", peer.PortMAC(peerPort).String(), "MAC_ADDRESS"}
	g.mu.Lock()
	defer g.mu.Unlock()
	pl := g.portLocked(port)
	stale := false
	for j, v := range vals {
		i := len(publishedLeaves) + j
		if held := pl.vals[i]; held != nil && held.GetStringVal() == v {
			continue // unchanged: no value made
		}
		stale = g.setLocked(ts, pl, a, i, strVal(v)) || stale
	}
	if stale {
		return fmt.Errorf("gnmi update for %s %s lldp: %w", g.sw.name, a.name.GetStringVal(), errStale)
	}
	return nil
}

// publishedLeaves are the leaves served for every interface: under
// /interfaces/interface[name]/..., or, with qos, the RDMA queue's
// /qos/.../queue[name]/state/<leaf>. A counter's value comes from the
// last tick's sample (never held: see setCounters); every other leaf's
// from the port's status and configuration, published when it changes.
var publishedLeaves = [...]publishedLeaf{
	{path: []string{"state", "counters", "in-octets"}, counter: func(c portCounters) uint64 { return uint64(c.inOctets) }},
	{path: []string{"state", "counters", "out-octets"}, counter: func(c portCounters) uint64 { return uint64(c.outOctets) }},
	{path: []string{"state", "counters", "in-unicast-pkts"}, counter: func(c portCounters) uint64 { return uint64(c.inOctets / packetBytes) }},
	{path: []string{"state", "counters", "out-unicast-pkts"}, counter: func(c portCounters) uint64 { return uint64(c.outOctets / packetBytes) }},
	{path: []string{"state", "counters", "in-discards"}, counter: func(c portCounters) uint64 { return uint64(c.inDiscardOctets / packetBytes) }},
	{path: []string{"state", "counters", "out-discards"}, counter: func(c portCounters) uint64 { return uint64(c.outDiscardOctets / packetBytes) }},
	{path: []string{"state", "oper-status"}, state: func(_ *gnmipb.TypedValue, up bool, _ ifConfig) *gnmipb.TypedValue { return upDownVal(up) }},
	{path: []string{"state", "admin-status"}, state: func(_ *gnmipb.TypedValue, _ bool, c ifConfig) *gnmipb.TypedValue { return upDownVal(c.Enabled) }},
	{path: []string{"state", "name"}, state: func(n *gnmipb.TypedValue, _ bool, _ ifConfig) *gnmipb.TypedValue { return n }},
	{path: []string{"state", "enabled"}, state: func(_ *gnmipb.TypedValue, _ bool, c ifConfig) *gnmipb.TypedValue { return boolValue(c.Enabled) }},
	{path: []string{"state", "mtu"}, state: func(_ *gnmipb.TypedValue, _ bool, c ifConfig) *gnmipb.TypedValue { return mtuVal(c.MTU) }},
	{path: []string{"state", "description"}, state: func(_ *gnmipb.TypedValue, _ bool, c ifConfig) *gnmipb.TypedValue { return descVal(c.Description) }},
	{path: []string{"config", "name"}, state: func(n *gnmipb.TypedValue, _ bool, _ ifConfig) *gnmipb.TypedValue { return n }},
	{path: []string{"config", "enabled"}, state: func(_ *gnmipb.TypedValue, _ bool, c ifConfig) *gnmipb.TypedValue { return boolValue(c.Enabled) }},
	{path: []string{"config", "mtu"}, state: func(_ *gnmipb.TypedValue, _ bool, c ifConfig) *gnmipb.TypedValue { return mtuVal(c.MTU) }},
	{path: []string{"config", "description"}, state: func(_ *gnmipb.TypedValue, _ bool, c ifConfig) *gnmipb.TypedValue { return descVal(c.Description) }},
	{path: []string{"ecn-marked-octets"}, qos: true, counter: func(c portCounters) uint64 { return uint64(c.ecnOctets) }},
	{path: []string{"ecn-marked-pkts"}, qos: true, counter: func(c portCounters) uint64 { return uint64(c.ecnOctets / packetBytes) }},
	// The queue's depth, bytes: now, and the highest since the last
	// sample (a watermark, as switches export their buffers' use).
	{path: []string{"avg-queue-len"}, qos: true, counter: func(c portCounters) uint64 { return uint64(c.queueBytes) }},
	{path: []string{"max-queue-len"}, qos: true, counter: func(c portCounters) uint64 { return uint64(c.queueMaxBytes) }},
}

// publishedLeaf is a leaf served for every interface: its path below the
// interface (or the RDMA queue, with qos), and where its value comes from.
type publishedLeaf struct {
	path    []string
	qos     bool
	counter func(c portCounters) uint64
	state   func(name *gnmipb.TypedValue, operUp bool, cfg ifConfig) *gnmipb.TypedValue
}

// leafAddr is one published leaf's path, shared by every notification
// of it (never modified), and its elements as queries are matched
// against them.
type leafAddr struct {
	path  *gnmipb.Path
	elems []string
}

// nLeaves is how many leaves a port publishes: its interface's (and RDMA
// queue's), then its LLDP neighbour's.
const nLeaves = len(publishedLeaves) + len(lldpLeaves)

// operStatusLeaf is oper-status's index in publishedLeaves.
var operStatusLeaf = slices.IndexFunc(publishedLeaves[:], func(l publishedLeaf) bool {
	return slices.Equal(l.path, []string{"state", "oper-status"})
})

// portAddr is a port's leaf addresses and its name as a value.
type portAddr struct {
	leaves [nLeaves]leafAddr
	name   *gnmipb.TypedValue
}

// portAddresses are each port number's addresses (uint32 → *portAddr).
// A path names no switch, so one set per port number serves every
// switch: built once for each of a k=48 fat-tree's 138,240 interfaces,
// they would be a third of its bring-up.
var portAddresses sync.Map

func portAddrs(port uint32) *portAddr {
	if a, ok := portAddresses.Load(port); ok {
		return a.(*portAddr)
	}
	name := models.InterfaceName(port)
	keyed := map[string]*gnmipb.PathElem{} // this interface's keyed elements
	a := &portAddr{name: strVal(name)}
	for i, l := range publishedLeaves {
		if l.qos {
			a.leaves[i].path = sharedElems(ocpath.Queue(name, rdmaQueue, l.path[0]), keyed)
		} else {
			a.leaves[i].path = sharedElems(interfacePath(name, l.path...), keyed)
		}
	}
	for j, l := range lldpLeaves {
		a.leaves[len(publishedLeaves)+j].path = sharedElems(&gnmipb.Path{Elem: []*gnmipb.PathElem{{Name: "lldp"}, {Name: "interfaces"},
			{Name: "interface", Key: map[string]string{"name": name}}, {Name: "neighbors"}, {Name: "neighbor", Key: map[string]string{"id": "1"}},
			{Name: "state"}, {Name: l}}}, keyed)
	}
	for i := range a.leaves {
		a.leaves[i].elems = gpath.ToStrings(a.leaves[i].path, false)
	}
	have, _ := portAddresses.LoadOrStore(port, a)
	return have.(*portAddr)
}

// unkeyedElems are published paths' elements without keys, one per name
// for every switch (never modified).
var unkeyedElems sync.Map

// sharedElems makes p's elements shared ones: one per name for those
// without keys, one per interface (in keyed) for the keyed ones — a
// fat-tree of thousands of switches publishes millions of leaves, and a
// path of its own for each would be a third of fabricsim's heap.
func sharedElems(p *gnmipb.Path, keyed map[string]*gnmipb.PathElem) *gnmipb.Path {
	for i, e := range p.Elem {
		if len(e.Key) > 0 {
			k := e.Name + fmt.Sprint(e.Key)
			if have, ok := keyed[k]; ok {
				p.Elem[i] = have
			} else {
				keyed[k] = e
			}
			continue
		}
		have, _ := unkeyedElems.LoadOrStore(e.Name, e)
		p.Elem[i] = have.(*gnmipb.PathElem)
	}
	return p
}

// publish publishes the port's status and configuration leaves that
// changed. Counters are not held as leaves: they change at every tick,
// and are served from the last tick's sample (setCounters).
func (g *gnmiServer) publish(ts int64, port uint32, operUp bool) error {
	cfg := g.ifConfig(port)
	a := portAddrs(port)
	g.mu.Lock()
	defer g.mu.Unlock()
	pl := g.portLocked(port)
	stale := false
	for i, l := range publishedLeaves {
		if l.state != nil {
			stale = g.setLocked(ts, pl, a, i, l.state(a.name, operUp, cfg)) || stale
		}
	}
	if stale {
		// An oper-status change overtook this sample: the next sample
		// sends these values again.
		return fmt.Errorf("gnmi update for %s %s: %w", g.sw.name, a.name.GetStringVal(), errStale)
	}
	return nil
}

// query collects the published leaves under a path (wildcards allowed)
// and the last tick's counters under it, one notification per leaf.
func (g *gnmiServer) query(elems []string) ([]*gnmipb.Notification, error) {
	g.mu.Lock()
	var out []*gnmipb.Notification
	for _, port := range g.ports {
		pl, a := g.leaves[port], portAddrs(port)
		for i, v := range pl.vals {
			if v != nil && matches(elems, a.leaves[i].elems) {
				out = append(out, g.notification(pl.ts[i], a.leaves[i].path, v))
			}
		}
	}
	g.mu.Unlock()
	return append(out, g.counterNotifications(elems)...), nil
}

// encode converts a (PROTO-typed) notification to the requested encoding.
// A PROTO notification is sent as it is: its path and value are shared
// and never modified, so copying each (most of what a sample cost)
// bought nothing.
func encode(n *gnmipb.Notification, enc gnmipb.Encoding) *gnmipb.Notification {
	if enc != gnmipb.Encoding_JSON && enc != gnmipb.Encoding_JSON_IETF {
		return n
	}
	n = proto.Clone(n).(*gnmipb.Notification)
	for _, u := range n.Update {
		var v any
		switch x := u.GetVal().GetValue().(type) {
		case *gnmipb.TypedValue_UintVal:
			full := &gnmipb.Path{Elem: append(slices.Clone(n.GetPrefix().GetElem()), u.GetPath().GetElem()...)}
			if enc == gnmipb.Encoding_JSON_IETF && isUint64Leaf(full) {
				v = strconv.FormatUint(x.UintVal, 10) // RFC 7951: 64-bit integers are strings
			} else {
				v = x.UintVal
			}
		case *gnmipb.TypedValue_StringVal:
			v = x.StringVal
		case *gnmipb.TypedValue_BoolVal:
			v = x.BoolVal
		default:
			continue
		}
		b, _ := json.Marshal(v)
		if enc == gnmipb.Encoding_JSON_IETF {
			u.Val = &gnmipb.TypedValue{Value: &gnmipb.TypedValue_JsonIetfVal{JsonIetfVal: b}}
		} else {
			u.Val = &gnmipb.TypedValue{Value: &gnmipb.TypedValue_JsonVal{JsonVal: b}}
		}
	}
	return n
}

// completePath joins a request's prefix and path into the elements the
// cache is keyed by. fabricsim serves OpenConfig only, so the origin
// "openconfig" (what clients such as gnmic send) and no origin name the
// same tree; any other origin has no data here.
func completePath(prefix, p *gnmipb.Path) ([]string, error) {
	strip := func(x *gnmipb.Path) (*gnmipb.Path, error) {
		switch x.GetOrigin() {
		case "":
			return x, nil
		case "openconfig":
			x = proto.Clone(x).(*gnmipb.Path)
			x.Origin = ""
			return x, nil
		}
		return nil, fmt.Errorf("origin %q is not served here (only openconfig)", x.GetOrigin())
	}
	if prefix.GetOrigin() != "" && p.GetOrigin() != "" {
		return nil, fmt.Errorf("origin is set both in prefix and path")
	}
	pre, err := strip(prefix)
	if err != nil {
		return nil, err
	}
	path, err := strip(p)
	if err != nil {
		return nil, err
	}
	return gpath.CompletePath(pre, path)
}

// isUint64Leaf says whether a leaf is a 64-bit integer in its YANG model
// (counter64, timeticks64), which RFC 7951 encodes as a string in JSON;
// the other unsigned leaves fabricsim serves (mtu: uint16) are numbers.
func isUint64Leaf(p *gnmipb.Path) bool {
	for _, e := range p.GetElem() {
		if e.GetName() == "counters" || e.GetName() == "last-change" {
			return true
		}
	}
	return false
}

func checkEncoding(enc gnmipb.Encoding) error {
	switch enc {
	case gnmipb.Encoding_JSON, gnmipb.Encoding_JSON_IETF, gnmipb.Encoding_PROTO:
		return nil
	}
	return status.Errorf(codes.Unimplemented, "encoding %s is not supported (JSON, JSON_IETF, PROTO are)", enc)
}

func (g *gnmiServer) checkTarget(prefix *gnmipb.Path) error {
	if t := prefix.GetTarget(); t != "" && t != string(g.sw.name) {
		return status.Errorf(codes.NotFound, "no such target %q (this is %s)", t, g.sw.name)
	}
	return nil
}

func (g *gnmiServer) Get(_ context.Context, req *gnmipb.GetRequest) (*gnmipb.GetResponse, error) {
	if g.sw.down.Load() {
		return nil, status.Error(codes.Unavailable, "switch is down")
	}
	if err := checkEncoding(req.GetEncoding()); err != nil {
		return nil, err
	}
	if err := g.checkTarget(req.GetPrefix()); err != nil {
		return nil, err
	}
	resp := &gnmipb.GetResponse{}
	for _, p := range req.GetPath() {
		elems, err := completePath(req.GetPrefix(), p)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "path: %v", err)
		}
		ns, err := g.query(elems)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "query: %v", err)
		}
		found := 0
		for _, n := range ns {
			if !wantDataType(n, req.GetType()) {
				continue
			}
			found++
			resp.Notification = append(resp.Notification, encode(n, req.GetEncoding()))
		}
		if found == 0 {
			return nil, status.Errorf(codes.NotFound, "no data at /%s", strings.Join(elems, "/"))
		}
	}
	return resp, nil
}

// wantDataType filters Get results by their container: config or state.
func wantDataType(n *gnmipb.Notification, t gnmipb.GetRequest_DataType) bool {
	if t == gnmipb.GetRequest_ALL {
		return true
	}
	inConfig := false
	for _, u := range n.GetUpdate() {
		for _, e := range u.GetPath().GetElem() {
			if e.GetName() == "config" {
				inConfig = true
			}
		}
	}
	if t == gnmipb.GetRequest_CONFIG {
		return inConfig
	}
	return !inConfig // STATE and OPERATIONAL
}

// configSchema is the OpenConfig schema of an interface's config
// container, which is all Set accepts.
var configSchema = oc.SchemaTree["OpenconfigInterfaces_Interfaces_Interface_Config"]

// decodeConfig checks a value set at leaf (none: the container itself)
// of an interface's config container against the OpenConfig schema, as
// a real target would, and decodes it, in one pass. It starts from the
// container rather than the device root: the same check and value
// (TestDecodeConfigAsFromTheRoot), without building a device and an
// interface list for every leaf: 9.5 µs a leaf against 46 (ygot renders
// each new list entry as text for a debug line it then drops), and a
// k=48 cold start sets 414,720 leaves.
//
// A leaf set with a typed value of its own kind (what accelnet sends:
// enabled a bool, mtu a uint that fits 16 bits, description a string),
// whose only checks are those, is decoded without ygot: SetNode would be
// 9% of the emulator's CPU over a k=48 cold start (85 ns a leaf against
// 6.7 µs: `go test ./fabricsim -run '^$' -bench DecodeConfig`).
// TestDecodeConfigAsFromTheRoot holds every value to the root's answer.
func decodeConfig(leaf []*gnmipb.PathElem, v *gnmipb.TypedValue) (*oc.OpenconfigInterfaces_Interfaces_Interface_Config, error) {
	cfg := &oc.OpenconfigInterfaces_Interfaces_Interface_Config{}
	if len(leaf) == 1 && len(leaf[0].GetKey()) == 0 {
		switch x := v.GetValue().(type) {
		case *gnmipb.TypedValue_BoolVal:
			if leaf[0].GetName() == "enabled" {
				enabled := x.BoolVal
				cfg.Enabled = &enabled
				return cfg, nil
			}
		case *gnmipb.TypedValue_UintVal:
			if leaf[0].GetName() == "mtu" && x.UintVal <= math.MaxUint16 {
				mtu := uint16(x.UintVal)
				cfg.Mtu = &mtu
				return cfg, nil
			}
		case *gnmipb.TypedValue_StringVal:
			if leaf[0].GetName() == "description" {
				description := x.StringVal
				cfg.Description = &description
				return cfg, nil
			}
		}
	}
	if err := ytypes.SetNode(configSchema, cfg, &gnmipb.Path{Elem: leaf}, v); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Set changes interface configuration: /interfaces/interface[name=N]/config/
// {enabled,mtu,description}, or the config container as JSON. The request
// is applied whole or not at all; disabling an interface takes its link down.
func (g *gnmiServer) Set(_ context.Context, req *gnmipb.SetRequest) (*gnmipb.SetResponse, error) {
	if g.sw.down.Load() {
		return nil, status.Error(codes.Unavailable, "switch is down")
	}
	if err := g.checkTarget(req.GetPrefix()); err != nil {
		return nil, err
	}
	if err := g.arbitrate(req.GetExtension()); err != nil {
		return nil, err
	}
	cs := &configSet{g: g, prefix: req.GetPrefix(), ports: map[string]uint32{}, staged: map[uint32]ifConfig{}, touched: map[uint32]bool{}}
	for _, p := range g.sw.fabric.snap.Ports(g.sw.name) {
		cs.ports[models.InterfaceName(p)] = p
	}
	g.mu.Lock()
	maps.Copy(cs.staged, g.config)
	g.mu.Unlock()
	resp := &gnmipb.SetResponse{Prefix: req.GetPrefix()}
	for _, d := range req.GetDelete() {
		if err := cs.remove(d); err != nil {
			return nil, err
		}
		resp.Response = append(resp.Response, &gnmipb.UpdateResult{Path: d, Op: gnmipb.UpdateResult_DELETE})
	}
	for _, u := range req.GetReplace() {
		if err := cs.apply(u.GetPath(), u.GetVal(), true); err != nil {
			return nil, err
		}
		resp.Response = append(resp.Response, &gnmipb.UpdateResult{Path: u.GetPath(), Op: gnmipb.UpdateResult_REPLACE})
	}
	for _, u := range req.GetUpdate() {
		if err := cs.apply(u.GetPath(), u.GetVal(), false); err != nil {
			return nil, err
		}
		resp.Response = append(resp.Response, &gnmipb.UpdateResult{Path: u.GetPath(), Op: gnmipb.UpdateResult_UPDATE})
	}
	if err := g.commitConfig(cs.staged, cs.touched); err != nil {
		return nil, err
	}
	resp.Timestamp = time.Now().UnixNano()
	return resp, nil
}

// configSet is a Set request's changes staged over the switch's
// configuration (staged), with the ports it sets (touched).
type configSet struct {
	g       *gnmiServer
	prefix  *gnmipb.Path
	ports   map[string]uint32 // by interface name
	staged  map[uint32]ifConfig
	touched map[uint32]bool
}

// get is port's staged configuration.
func (cs *configSet) get(port uint32) ifConfig {
	if c, ok := cs.staged[port]; ok {
		return c
	}
	return defaultConfig()
}

// resolve returns the port and the config leaf ("" for the container)
// of path p under the request's prefix, and the full path.
func (cs *configSet) resolve(p *gnmipb.Path) (uint32, string, *gnmipb.Path, error) {
	if _, err := completePath(cs.prefix, p); err != nil {
		return 0, "", nil, status.Errorf(codes.InvalidArgument, "path %v: %v", p, err)
	}
	full := &gnmipb.Path{Elem: append(slices.Clone(cs.prefix.GetElem()), p.GetElem()...)}
	el := full.GetElem()
	if len(el) < 3 || el[0].GetName() != "interfaces" || el[1].GetName() != "interface" || el[2].GetName() != "config" || len(el) > 4 {
		return 0, "", nil, status.Errorf(codes.InvalidArgument, "path %v: only /interfaces/interface[name=…]/config[/enabled|mtu|description] can be set", full)
	}
	port, ok := cs.ports[el[1].GetKey()["name"]]
	if !ok {
		return 0, "", nil, status.Errorf(codes.NotFound, "no interface %q on %s", el[1].GetKey()["name"], cs.g.sw.name)
	}
	leaf := ""
	if len(el) == 4 {
		leaf = el[3].GetName()
		switch leaf {
		case "enabled", "mtu", "description":
		default:
			return 0, "", nil, status.Errorf(codes.InvalidArgument, "config leaf %q cannot be set (enabled, mtu, description can)", leaf)
		}
	}
	return port, leaf, full, nil
}

// apply stages an update (a replace: the container from defaults).
func (cs *configSet) apply(p *gnmipb.Path, v *gnmipb.TypedValue, replace bool) error {
	port, leaf, full, err := cs.resolve(p)
	if err != nil {
		return err
	}
	if j := v.GetJsonVal(); j != nil {
		// Capabilities lists JSON: for these leaves (booleans, a uint16, a
		// string) its encoding is RFC 7951's.
		v = &gnmipb.TypedValue{Value: &gnmipb.TypedValue_JsonIetfVal{JsonIetfVal: j}}
	}
	set, err := decodeConfig(full.GetElem()[3:], v)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "%v: %v", full, err)
	}
	cfg := cs.get(port)
	if replace && leaf == "" {
		cfg = defaultConfig()
	}
	if set.Enabled != nil {
		cfg.Enabled = *set.Enabled
	}
	if set.Mtu != nil {
		if *set.Mtu < 68 {
			return status.Errorf(codes.InvalidArgument, "mtu %d is below the IPv4 minimum of 68", *set.Mtu)
		}
		cfg.MTU = *set.Mtu
	}
	if set.Description != nil {
		cfg.Description = *set.Description
	}
	cs.staged[port], cs.touched[port] = cfg, true
	return nil
}

// remove stages a delete: the leaf, or the container, back to defaults.
func (cs *configSet) remove(d *gnmipb.Path) error {
	port, leaf, _, err := cs.resolve(d)
	if err != nil {
		return err
	}
	cfg, def := cs.get(port), defaultConfig()
	switch leaf {
	case "":
		cfg = def
	case "enabled":
		cfg.Enabled = def.Enabled
	case "mtu":
		cfg.MTU = def.MTU
	case "description":
		cfg.Description = def.Description
	}
	cs.staged[port], cs.touched[port] = cfg, true
	return nil
}

// commitConfig takes staged as the switch's configuration, then into the
// dataplane, then publishes the touched ports' state.
func (g *gnmiServer) commitConfig(staged map[uint32]ifConfig, touched map[uint32]bool) error {
	g.mu.Lock()
	g.config = staged
	g.mu.Unlock()
	f := g.sw.fabric
	type pub struct {
		port uint32
		up   bool
	}
	var pubs []pub
	f.mu.Lock()
	enabling := false // a port's admin state changed: the dataplane's concern
	for port, cfg := range staged {
		e := models.Endpoint{Switch: g.sw.name, Port: port}
		if cfg.Enabled == f.adminDown[e] {
			enabling = true
		}
		if cfg.Enabled {
			delete(f.adminDown, e)
		} else {
			f.adminDown[e] = true
		}
		if touched[port] {
			pubs = append(pubs, pub{port, f.operUpLocked(e)})
		}
	}
	if enabling {
		// The flows are traced again at the next tick; an MTU or a
		// description (which the dataplane does not model) costs none:
		// 320 switches configured while a workload ran recomputed the
		// whole fabric per Set.
		f.markDirty("", true, false)
	}
	f.mu.Unlock()
	// Publish the new config (and any oper-status it changed) now; the
	// dataplane catches up at its next tick. A full tick here would cost a
	// whole-fabric recompute per Set.
	ts := time.Now().UnixNano()
	var peers []models.Endpoint
	for _, p := range pubs {
		if err := g.publish(ts, p.port, p.up); err != nil {
			return status.Errorf(codes.Internal, "publish: %v", err)
		}
		if l, ok := f.snap.LinkAt(models.Endpoint{Switch: g.sw.name, Port: p.port}); ok {
			peers = append(peers, l.A, l.B) // the far end sees the link go down too
		}
	}
	f.publishOperStatus(peers...)
	return nil
}

// subscriber is one Subscribe RPC.
type subscriber struct {
	g      *gnmiServer
	list   *gnmipb.SubscriptionList
	ctx    context.Context
	cancel context.CancelFunc

	// Responses wait in a queue that grows with the backlog (a fixed
	// channel big enough for an initial snapshot is a large pointer array
	// per subscriber that every garbage collection scans).
	mu      sync.Mutex
	pending []*gnmipb.SubscribeResponse
	closed  bool          // no more responses: the sender drains and stops
	wake    chan struct{} // one token: pending or closed changed
}

// maxPending is how many responses may wait for a slow subscriber before
// it is disconnected rather than allowed to stall the switch.
const maxPending = 65536

// send queues a response; a subscriber that cannot keep up is disconnected
// rather than allowed to stall the switch.
func (s *subscriber) send(r *gnmipb.SubscribeResponse) {
	s.mu.Lock()
	full := len(s.pending) >= maxPending
	if !full && !s.closed {
		s.pending = append(s.pending, r)
	}
	s.mu.Unlock()
	if full {
		s.cancel()
		return
	}
	s.signal()
}

func (s *subscriber) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// close lets the sender finish what is queued and stop.
func (s *subscriber) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.signal()
}

// next takes what is queued, and says whether the sender should stop
// once that is sent.
func (s *subscriber) next() ([]*gnmipb.SubscribeResponse, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	batch := s.pending
	s.pending = nil
	return batch, s.closed
}

func (s *subscriber) sendNotifications(ns []*gnmipb.Notification) {
	for _, n := range ns {
		s.send(&gnmipb.SubscribeResponse{Response: &gnmipb.SubscribeResponse_Update{Update: encode(n, s.list.GetEncoding())}})
	}
}

func syncResponse() *gnmipb.SubscribeResponse {
	return &gnmipb.SubscribeResponse{Response: &gnmipb.SubscribeResponse_SyncResponse{SyncResponse: true}}
}

func (s *subscriber) snapshot(sub *gnmipb.Subscription) ([]*gnmipb.Notification, error) {
	elems, err := completePath(s.list.GetPrefix(), sub.GetPath())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "path: %v", err)
	}
	return s.g.query(elems)
}

func (s *subscriber) snapshotAll() error {
	for _, sub := range s.list.GetSubscription() {
		ns, err := s.snapshot(sub)
		if err != nil {
			return err
		}
		s.sendNotifications(ns)
	}
	return nil
}

// isCounterPath tells TARGET_DEFINED what a path is: counters are sampled,
// everything else (status, config) is sent on change.
func isCounterPath(p *gnmipb.Path) bool {
	for _, e := range p.GetElem() {
		if e.GetName() == "counters" || strings.HasSuffix(e.GetName(), "-octets") || strings.HasSuffix(e.GetName(), "-pkts") || strings.HasSuffix(e.GetName(), "-discards") {
			return true
		}
	}
	return false
}

// queries checks a subscription list's target, encoding and paths, and
// returns the paths, each under the list's prefix and this switch's name.
func (g *gnmiServer) queries(list *gnmipb.SubscriptionList) ([][]string, error) {
	if err := g.checkTarget(list.GetPrefix()); err != nil {
		return nil, err
	}
	if err := checkEncoding(list.GetEncoding()); err != nil {
		return nil, err
	}
	if len(list.GetSubscription()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "no subscriptions")
	}
	queries := make([][]string, len(list.GetSubscription()))
	for i, sub := range list.GetSubscription() {
		elems, err := completePath(list.GetPrefix(), sub.GetPath())
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "subscription %d: path: %v", i, err)
		}
		if g.sw.fabric.noQueueDepths && len(elems) > 0 && (elems[len(elems)-1] == "avg-queue-len" || elems[len(elems)-1] == "max-queue-len") {
			return nil, status.Errorf(codes.NotFound, "subscription %d: %s serves no queue depths", i, g.sw.name)
		}
		queries[i] = append([]string{string(g.sw.name)}, elems...)
	}
	return queries, nil
}

// sendAll sends the queued responses until the subscription ends, the
// queue is closed and drained, or a send fails (its error); a killed
// switch (kill) cancels the subscription.
func (s *subscriber) sendAll(stream gnmipb.GNMI_SubscribeServer, kill <-chan struct{}) error {
	for {
		select {
		case <-s.ctx.Done():
			return nil
		case <-kill:
			s.cancel()
		case <-s.wake:
			batch, done := s.next()
			for _, r := range batch {
				if err := stream.Send(r); err != nil {
					s.cancel()
					return err
				}
			}
			if done {
				return nil
			}
		}
	}
}

// poll serves a POLL subscription: a snapshot now and at every Poll.
func (s *subscriber) poll(stream gnmipb.GNMI_SubscribeServer) error {
	if err := s.snapshotAll(); err != nil {
		return err
	}
	s.send(syncResponse())
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if req.GetPoll() == nil {
			return status.Error(codes.InvalidArgument, "a POLL subscription takes only Poll requests")
		}
		if err := s.snapshotAll(); err != nil {
			return err
		}
		s.send(syncResponse())
	}
}

// sampler is a STREAM subscription's sampling: its interval, heartbeat
// and whether it suppresses redundant samples.
type sampler struct {
	sub       *gnmipb.Subscription
	interval  time.Duration
	heartbeat time.Duration
	suppress  bool
}

// streamed sets up a STREAM subscription's parts: ON_CHANGE paths
// watched (each with its unwatch, to call when the subscription ends,
// also on an error) and the samplers to run.
func (s *subscriber) streamed(queries [][]string) (samplers []sampler, unwatch []func(), err error) {
	g := s.g
	for i, sub := range s.list.GetSubscription() {
		mode := sub.GetMode()
		if mode == gnmipb.SubscriptionMode_TARGET_DEFINED {
			mode = gnmipb.SubscriptionMode_ON_CHANGE
			if isCounterPath(sub.GetPath()) {
				mode = gnmipb.SubscriptionMode_SAMPLE
			}
		}
		hb := time.Duration(sub.GetHeartbeatInterval())
		if hb != 0 && hb < time.Millisecond {
			return nil, unwatch, status.Errorf(codes.InvalidArgument, "heartbeat_interval %s is below 1ms", hb)
		}
		switch mode {
		case gnmipb.SubscriptionMode_ON_CHANGE:
			// Watched before the snapshot: a leaf changed meanwhile is in
			// it, or sent after it, or both.
			unwatch = append(unwatch, g.watch(s, queries[i][1:]))
			if hb > 0 {
				samplers = append(samplers, sampler{sub: sub, interval: hb})
			}
		case gnmipb.SubscriptionMode_SAMPLE:
			iv := time.Duration(sub.GetSampleInterval())
			if iv == 0 {
				iv = g.minSample
			}
			if iv < time.Millisecond {
				return nil, unwatch, status.Errorf(codes.InvalidArgument, "sample_interval %s is below the 1ms this target supports", iv)
			}
			samplers = append(samplers, sampler{sub: sub, interval: iv, heartbeat: hb, suppress: sub.GetSuppressRedundant()})
		default:
			return nil, unwatch, status.Errorf(codes.InvalidArgument, "subscription mode %s is not supported", sub.GetMode())
		}
	}
	return samplers, unwatch, nil
}

func (g *gnmiServer) Subscribe(stream gnmipb.GNMI_SubscribeServer) error {
	if g.sw.down.Load() {
		return status.Error(codes.Unavailable, "switch is down")
	}
	req, err := stream.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
	list := req.GetSubscribe()
	if list == nil {
		return status.Error(codes.InvalidArgument, "the first request must be a SubscriptionList")
	}
	queries, err := g.queries(list)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	kill := g.sw.killed()
	s := &subscriber{g: g, list: list, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1)}
	sendErr := make(chan error, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { sendErr <- s.sendAll(stream, kill) })
	finish := func(err error) error {
		if err == nil {
			s.close() // the sender drains what is queued, then stops
			if e := <-sendErr; e != nil {
				return e
			}
			return nil
		}
		cancel()
		return err
	}

	switch list.GetMode() {
	case gnmipb.SubscriptionList_ONCE:
		if err := s.snapshotAll(); err != nil {
			return finish(err)
		}
		s.send(syncResponse())
		return finish(nil)

	case gnmipb.SubscriptionList_POLL:
		return finish(s.poll(stream))

	case gnmipb.SubscriptionList_STREAM:
		samplers, unwatch, err := s.streamed(queries)
		defer func() {
			for _, u := range unwatch {
				u()
			}
		}()
		if err != nil {
			return finish(err)
		}
		if !list.GetUpdatesOnly() {
			if err := s.snapshotAll(); err != nil {
				return finish(err)
			}
		}
		s.send(syncResponse())
		for _, sm := range samplers {
			wg.Go(func() { s.sample(sm.sub, sm.interval, sm.heartbeat, sm.suppress) })
		}
		go func() {
			// Clients send nothing more on a STREAM subscription; a
			// receive error means they went away.
			for {
				if _, err := stream.Recv(); err != nil {
					if !errors.Is(err, io.EOF) {
						cancel()
					}
					return
				}
			}
		}()
		<-ctx.Done()
		if err := <-sendErr; err != nil {
			return err
		}
		if stream.Context().Err() == nil {
			return status.Error(codes.Unavailable, "stream closed by the switch")
		}
		return nil
	}
	return finish(status.Errorf(codes.InvalidArgument, "subscription list mode %s is not supported", list.GetMode()))
}

// sample sends a subscription's values every interval. With suppress, only
// values that changed since they were last sent go out, unless a heartbeat
// is due.
//
// The first sample goes out at the switch's own phase of the interval
// (samplePhase), and every interval after it.
func (s *subscriber) sample(sub *gnmipb.Subscription, interval, heartbeat time.Duration, suppress bool) {
	select {
	case <-s.ctx.Done():
		return
	case <-time.After(samplePhase(s.g.sw.name, interval)):
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	// The last value sent of each leaf, by its path: a leaf's path is
	// one shared value (portAddrs), so it names the leaf without the
	// path's text made for every leaf at every interval.
	last := map[*gnmipb.Path]*gnmipb.TypedValue{}
	lastBeat := time.Now()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		ns, err := s.snapshot(sub)
		if err != nil {
			s.cancel()
			return
		}
		beat := heartbeat > 0 && time.Since(lastBeat) >= heartbeat
		if beat {
			lastBeat = time.Now()
		}
		var send []*gnmipb.Notification
		for _, n := range ns {
			if suppress && !beat && len(n.GetUpdate()) == 1 {
				u := n.GetUpdate()[0]
				if v, sent := last[u.GetPath()]; sent && sameValue(v, u.GetVal()) {
					continue
				}
				last[u.GetPath()] = u.GetVal()
			}
			send = append(send, n)
		}
		s.sendNotifications(mergeByTimestamp(send))
	}
}

// samplePhase is how far into the interval a switch's samples go out:
// spread by the switch's name. A controller subscribes to every switch
// within a second or so, and the emulator's switches share the
// machine's cores, which real switches do not: in step, a k=48 fabric's
// 2,880 switches would build their samples at once and take both cores
// for about two seconds every interval, and a failure that came then
// would wait.
func samplePhase(sw models.SwitchID, interval time.Duration) time.Duration {
	h := fnv.New64a()
	h.Write([]byte(sw))
	return time.Duration(h.Sum64() % uint64(interval))
}

// mergeByTimestamp joins notifications of the same moment and prefix into
// one (a sample of a wildcard path is one notification per leaf: 20
// messages a switch a path a second, where one does), each
// update keeping its path; the order of first appearance is kept.
func mergeByTimestamp(ns []*gnmipb.Notification) []*gnmipb.Notification {
	if len(ns) < 2 {
		return ns
	}
	type key struct {
		ts     int64
		prefix string
	}
	var out []*gnmipb.Notification
	at := map[key]int{}
	for _, n := range ns {
		k := key{n.GetTimestamp(), prefixKey(n.GetPrefix())}
		i, seen := at[k]
		if !seen {
			at[k] = len(out)
			out = append(out, &gnmipb.Notification{Timestamp: n.GetTimestamp(), Prefix: n.GetPrefix(), Update: slices.Clone(n.GetUpdate()), Delete: slices.Clone(n.GetDelete())})
			continue
		}
		out[i].Update = append(out[i].Update, n.GetUpdate()...)
		out[i].Delete = append(out[i].Delete, n.GetDelete()...)
	}
	return out
}

func prefixKey(p *gnmipb.Path) string {
	if p == nil {
		return ""
	}
	return p.GetOrigin() + "|" + p.GetTarget() + "|" + strings.Join(gpath.ToStrings(p, false), "/")
}
