package fabricsim

import (
	"context"
	"fmt"

	"github.com/openconfig/gnmi/cache"
	"github.com/openconfig/gnmi/ctree"
	gpath "github.com/openconfig/gnmi/path"
	gnmipb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/subscribe"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/accelnet/accelnet/models"
)

// gnmiServer serves one switch's OpenConfig interface state. Subscribe comes
// from the gnmi module's subscribe server over a cache that the dataplane
// refreshes every counter interval; Get answers from the same cache.
type gnmiServer struct {
	*subscribe.Server
	sw    *Switch
	cache *cache.Cache
}

func newGNMIServer(sw *Switch) (*gnmiServer, error) {
	c := cache.New([]string{string(sw.name)})
	sub, err := subscribe.NewServer(c)
	if err != nil {
		return nil, err
	}
	c.SetClient(sub.Update)
	return &gnmiServer{Server: sub, sw: sw, cache: c}, nil
}

func (g *gnmiServer) Capabilities(context.Context, *gnmipb.CapabilityRequest) (*gnmipb.CapabilityResponse, error) {
	return &gnmipb.CapabilityResponse{
		SupportedModels: []*gnmipb.ModelData{
			{Name: "openconfig-interfaces", Organization: "OpenConfig working group", Version: "3.0.0"},
		},
		SupportedEncodings: []gnmipb.Encoding{gnmipb.Encoding_JSON, gnmipb.Encoding_PROTO},
		GNMIVersion:        "0.10.0",
	}, nil
}

func (g *gnmiServer) Subscribe(stream gnmipb.GNMI_SubscribeServer) error {
	if g.sw.down.Load() {
		return status.Error(codes.Unavailable, "switch is down")
	}
	return g.Server.Subscribe(stream)
}

func (g *gnmiServer) Get(_ context.Context, req *gnmipb.GetRequest) (*gnmipb.GetResponse, error) {
	if g.sw.down.Load() {
		return nil, status.Error(codes.Unavailable, "switch is down")
	}
	if req.GetEncoding() != gnmipb.Encoding_JSON && req.GetEncoding() != gnmipb.Encoding_PROTO && req.GetEncoding() != gnmipb.Encoding_JSON_IETF {
		return nil, status.Errorf(codes.Unimplemented, "encoding %s is not supported", req.GetEncoding())
	}
	target := req.GetPrefix().GetTarget()
	if target != "" && target != string(g.sw.name) {
		return nil, status.Errorf(codes.NotFound, "no such target %q", target)
	}
	resp := &gnmipb.GetResponse{}
	for _, p := range req.GetPath() {
		elems, err := gpath.CompletePath(req.GetPrefix(), p)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "path: %v", err)
		}
		found := 0
		err = g.cache.Query(string(g.sw.name), elems, func(_ []string, l *ctree.Leaf, v any) error {
			n, ok := v.(*gnmipb.Notification)
			if !ok {
				return nil
			}
			found++
			resp.Notification = append(resp.Notification, proto.Clone(n).(*gnmipb.Notification))
			return nil
		})
		if err != nil {
			return nil, status.Errorf(codes.Internal, "query: %v", err)
		}
		if found == 0 {
			return nil, status.Errorf(codes.NotFound, "no data at %v", elems)
		}
	}
	return resp, nil
}

// interfacePath is /interfaces/interface[name=N]/state/<leaf...>.
func interfacePath(name string, leaf ...string) *gnmipb.Path {
	p := &gnmipb.Path{Elem: []*gnmipb.PathElem{
		{Name: "interfaces"},
		{Name: "interface", Key: map[string]string{"name": name}},
		{Name: "state"},
	}}
	for _, l := range leaf {
		p.Elem = append(p.Elem, &gnmipb.PathElem{Name: l})
	}
	return p
}

func uintVal(v uint64) *gnmipb.TypedValue {
	return &gnmipb.TypedValue{Value: &gnmipb.TypedValue_UintVal{UintVal: v}}
}

// publish pushes one port's counters and status into the cache, which
// forwards them to STREAM subscribers.
func (g *gnmiServer) publish(ts int64, port uint32, c portCounters, up bool) error {
	oper := "UP"
	if !up {
		oper = "DOWN"
	}
	name := models.InterfaceName(port)
	n := &gnmipb.Notification{
		Timestamp: ts,
		Prefix:    &gnmipb.Path{Target: string(g.sw.name)},
		Update: []*gnmipb.Update{
			{Path: interfacePath(name, "counters", "in-octets"), Val: uintVal(uint64(c.inOctets))},
			{Path: interfacePath(name, "counters", "out-octets"), Val: uintVal(uint64(c.outOctets))},
			{Path: interfacePath(name, "counters", "in-pkts"), Val: uintVal(uint64(c.inOctets / packetBytes))},
			{Path: interfacePath(name, "counters", "out-pkts"), Val: uintVal(uint64(c.outOctets / packetBytes))},
			{Path: interfacePath(name, "counters", "out-discards"), Val: uintVal(uint64(c.dropOctets / packetBytes))},
			{Path: interfacePath(name, "oper-status"), Val: &gnmipb.TypedValue{Value: &gnmipb.TypedValue_StringVal{StringVal: oper}}},
		},
	}
	if err := g.cache.GnmiUpdate(n); err != nil {
		return fmt.Errorf("gnmi cache update for %s %s: %w", g.sw.name, name, err)
	}
	return nil
}

func (g *gnmiServer) sync() { g.cache.Sync(string(g.sw.name)) }
