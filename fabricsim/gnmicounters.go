package fabricsim

import (
	gnmipb "github.com/openconfig/gnmi/proto/gnmi"
)

// counterSample is every port's counters at one tick.
type counterSample struct {
	ts     int64
	ports  []uint32
	values []portCounters
}

// setCounters takes a tick's counters (ports and values are the
// caller's no more) and sends them to the ON_CHANGE subscriptions that
// cover some. Before, every tick published every counter of every port
// into the cache — its tree, its path strings, its match index — the
// emulator's largest cost at scale; sampled subscriptions and Get read the
// sample when they need it instead.
func (g *gnmiServer) setCounters(ts int64, ports []uint32, values []portCounters) {
	g.mu.Lock()
	g.counters = counterSample{ts: ts, ports: ports, values: values}
	type watch struct {
		s *subscriber
		q [][]string
	}
	var ws []watch
	for s, q := range g.watchers {
		ws = append(ws, watch{s, q})
	}
	g.mu.Unlock()
	for _, w := range ws {
		for _, q := range w.q {
			w.s.sendNotifications(g.counterNotifications(q))
		}
	}
}

// counterNotifications are the last tick's counter leaves under the path
// elems (as the cache matches a query: "*" is any one element, and a path
// holds everything below it), one notification per leaf as the cache
// would give them.
func (g *gnmiServer) counterNotifications(elems []string) []*gnmipb.Notification {
	g.mu.Lock()
	defer g.mu.Unlock()
	smp := g.counters
	var out []*gnmipb.Notification
	for j, port := range smp.ports {
		a := portAddrs(port)
		for i, l := range publishedLeaves {
			if l.counter == nil || !matches(elems, a.leaves[i].elems) {
				continue
			}
			out = append(out, g.notification(smp.ts, a.leaves[i].path, uintVal(l.counter(smp.values[j]))))
		}
	}
	return out
}

// matches says whether a query (cache elements, "*" for any one) selects
// the leaf at elems: the leaf or a container above it.
func matches(query, elems []string) bool {
	if len(query) > len(elems) {
		return false
	}
	for i, q := range query {
		if q != "*" && q != elems[i] {
			return false
		}
	}
	return true
}

// watch sends s, until the returned func is called, each published leaf
// under query when it changes (setLocked), and the counters under it at
// every tick (they change at every tick): an ON_CHANGE subscription.
func (g *gnmiServer) watch(s *subscriber, query []string) func() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.watchers == nil {
		g.watchers = map[*subscriber][][]string{}
	}
	g.watchers[s] = append(g.watchers[s], query)
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		delete(g.watchers, s)
	}
}
