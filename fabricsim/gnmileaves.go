package fabricsim

import (
	"errors"
	"slices"

	gnmipb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/protobuf/proto"
)

// portLeaves are one port's published leaves (see gnmiServer), indexed as
// portAddr.leaves: each one's value (nil: never published; counters
// never are) and the timestamp of the update that set it. The common
// values are shared (upDownVal and the rest), so a port holds a few
// hundred bytes, not a notification, path string and tree node per leaf.
type portLeaves struct {
	vals [nLeaves]*gnmipb.TypedValue
	ts   [nLeaves]int64
}

// errStale is an update older than the value its leaf holds (a sample
// overtaken by an oper-status change): refused, as gNMI caches refuse
// one, and sent again with the next sample.
var errStale = errors.New("update is stale")

// portLocked is port's leaves, made on first use. Called with g.mu held.
func (g *gnmiServer) portLocked(port uint32) *portLeaves {
	pl := g.leaves[port]
	if pl == nil {
		pl = &portLeaves{}
		g.leaves[port] = pl
		i, _ := slices.BinarySearch(g.ports, port)
		g.ports = slices.Insert(g.ports, i, port)
	}
	return pl
}

// setLocked sets leaf i of a port's leaves pl (addresses a) to v at ts,
// unless it holds that value already, and sends the change to the
// ON_CHANGE subscriptions that cover the leaf (in the order changes are
// made: under g.mu). It reports whether the update was stale: older than
// the leaf's value, and refused. Called with g.mu held.
func (g *gnmiServer) setLocked(ts int64, pl *portLeaves, a *portAddr, i int, v *gnmipb.TypedValue) (stale bool) {
	if held := pl.vals[i]; held != nil && sameValue(held, v) {
		return false
	}
	if ts < pl.ts[i] {
		return true
	}
	pl.vals[i], pl.ts[i] = v, ts
	if len(g.watchers) == 0 {
		return false // nobody to tell (a fabric coming up: millions of leaves)
	}
	var n *gnmipb.Notification
	for s, queries := range g.watchers {
		for _, q := range queries {
			if matches(q, a.leaves[i].elems) {
				if n == nil {
					n = g.notification(ts, a.leaves[i].path, v)
				}
				s.sendNotifications([]*gnmipb.Notification{n})
				break
			}
		}
	}
	return false
}

// notification is one leaf's value at ts as a notification (prefix, path
// and value shared: never modified).
func (g *gnmiServer) notification(ts int64, path *gnmipb.Path, v *gnmipb.TypedValue) *gnmipb.Notification {
	return &gnmipb.Notification{Timestamp: ts, Prefix: g.prefix, Update: []*gnmipb.Update{{Path: path, Val: v}}}
}

// sameValue says whether two values are equal, without proto.Equal's
// reflection for the kinds published.
func sameValue(a, b *gnmipb.TypedValue) bool {
	if a == b {
		return true
	}
	switch x := a.GetValue().(type) {
	case *gnmipb.TypedValue_StringVal:
		y, ok := b.GetValue().(*gnmipb.TypedValue_StringVal)
		return ok && x.StringVal == y.StringVal
	case *gnmipb.TypedValue_UintVal:
		y, ok := b.GetValue().(*gnmipb.TypedValue_UintVal)
		return ok && x.UintVal == y.UintVal
	case *gnmipb.TypedValue_BoolVal:
		y, ok := b.GetValue().(*gnmipb.TypedValue_BoolVal)
		return ok && x.BoolVal == y.BoolVal
	}
	return proto.Equal(a, b)
}

// The values most leaves hold, shared by every port of every switch.
var (
	upVal, downVal    = strVal("UP"), strVal("DOWN")
	trueVal, falseVal = boolVal(true), boolVal(false)
	defaultMTUVal     = uintVal(uint64(defaultConfig().MTU))
	noDescriptionVal  = strVal(defaultConfig().Description)
)

func upDownVal(up bool) *gnmipb.TypedValue {
	if up {
		return upVal
	}
	return downVal
}

func boolValue(b bool) *gnmipb.TypedValue {
	if b {
		return trueVal
	}
	return falseVal
}

func mtuVal(mtu uint16) *gnmipb.TypedValue {
	if uint64(mtu) == defaultMTUVal.GetUintVal() {
		return defaultMTUVal
	}
	return uintVal(uint64(mtu))
}

func descVal(d string) *gnmipb.TypedValue {
	if d == noDescriptionVal.GetStringVal() {
		return noDescriptionVal
	}
	return strVal(d)
}
