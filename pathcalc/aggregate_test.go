package pathcalc

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// lookup is longest-prefix match over routes: the matching route's
// action ("m3", "g7"), or "" when nothing matches (the packet is dropped).
func lookup(routes []models.Route, a netip.Addr) string {
	best, out := -1, ""
	for _, r := range routes {
		if r.Prefix.Contains(a) && r.Prefix.Bits() > best {
			best = r.Prefix.Bits()
			out = fmt.Sprintf("m%d", r.MemberID)
			if r.GroupID != 0 {
				out = fmt.Sprintf("g%d", r.GroupID)
			}
		}
	}
	return out
}

// probes are the addresses where forwarding can change: the first and
// last address of every prefix and the ones just outside it.
func probes(sets ...[]models.Route) []netip.Addr {
	var out []netip.Addr
	for _, routes := range sets {
		for _, r := range routes {
			first := r.Prefix.Masked().Addr()
			b := first.As4()
			n := binary.BigEndian.Uint32(b[:]) | (1<<(32-r.Prefix.Bits()) - 1)
			binary.BigEndian.PutUint32(b[:], n)
			last := netip.AddrFrom4(b)
			out = append(out, first, last, first.Prev(), last.Next())
		}
	}
	return out
}

// randomRoutes is a table of non-duplicate prefixes inside 10.0.0.0/20,
// some nested, over a few actions (so that siblings often agree).
func randomRoutes(rng *rand.Rand, n int) []models.Route {
	seen := map[netip.Prefix]bool{}
	var out []models.Route
	for len(out) < n {
		bits := 20 + rng.IntN(13)
		a := netip.AddrFrom4([4]byte{10, 0, byte(rng.IntN(16)), byte(rng.IntN(256))})
		p := netip.PrefixFrom(a, bits).Masked()
		if bits < 24 && rng.IntN(3) > 0 {
			continue // mostly leaf-sized and host routes, as plans have
		}
		if seen[p] {
			continue
		}
		seen[p] = true
		r := models.Route{Prefix: p, GroupID: uint32(1 + rng.IntN(3))}
		if rng.IntN(4) == 0 {
			r = models.Route{Prefix: p, MemberID: uint32(1 + rng.IntN(2))}
		}
		out = append(out, r)
	}
	return out
}

// TestAggregateIsExact: on random tables (nested prefixes, few actions),
// every address that matters is forwarded by the aggregated table as by
// the original, unrouted ones stay unrouted, and aggregation shrinks
// tables whose siblings agree.
func TestAggregateIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	shrunk := 0
	for i := range 300 {
		routes := randomRoutes(rng, 1+rng.IntN(200))
		before := slices.Clone(routes)
		agg := Aggregate(routes)
		if !slices.Equal(routes, before) {
			t.Fatalf("table %d: Aggregate modified its input", i)
		}
		if len(agg) > len(routes) {
			t.Fatalf("table %d: %d routes became %d", i, len(routes), len(agg))
		}
		if len(agg) < len(routes) {
			shrunk++
		}
		for _, a := range probes(routes, agg) {
			if got, want := lookup(agg, a), lookup(routes, a); got != want {
				t.Fatalf("table %d: %s goes to %q aggregated, %q as planned\nplanned %v\naggregated %v", i, a, got, want, routes, agg)
			}
		}
		for j, r := range agg {
			if r.Prefix != r.Prefix.Masked() || (j > 0 && agg[j-1].Prefix == r.Prefix) {
				t.Fatalf("table %d: aggregated table has %v (unmasked or twice): %v", i, r.Prefix, agg)
			}
		}
	}
	if shrunk < 100 {
		t.Fatalf("only %d of 300 tables shrank: aggregation does not merge what it could", shrunk)
	}
}

// TestAggregateFatTree: with pods in aligned address blocks, a switch
// outside a pod reaches it with one entry (two when k/2 is not a power
// of two), and the aggregated plan forwards every host as planned.
func TestAggregateFatTree(t *testing.T) {
	for _, tc := range []struct{ k, perPod int }{{8, 1}, {16, 1}, {12, 2}} {
		topo, err := topology.FatTree(tc.k, 100)
		if err != nil {
			t.Fatal(err)
		}
		res := compute(t, topo, Limits{})
		snap, _ := topology.New(topo)
		for _, sw := range snap.Switches() {
			planned := res.Plan.Switches[sw.Name].Routes
			agg := Aggregate(planned)
			if sw.Role == models.RoleCore && len(agg) != tc.k*tc.perPod {
				t.Errorf("k=%d: %s has %d routes aggregated (%d planned), want %d: one per pod block", tc.k, sw.Name, len(agg), len(planned), tc.k*tc.perPod)
			}
			if sw.Role != models.RoleCore && len(agg) > len(planned)/2 {
				t.Errorf("k=%d: %s has %d routes aggregated of %d planned", tc.k, sw.Name, len(agg), len(planned))
			}
			for _, h := range topo.Hosts {
				if got, want := lookup(agg, h.IP), lookup(planned, h.IP); got != want {
					t.Fatalf("k=%d: %s sends %s (%s) to %q aggregated, %q as planned", tc.k, sw.Name, h.Name, h.IP, got, want)
				}
			}
		}
	}
}

// TestAggregatedRewriteNeverMixes: going from one aggregated table to
// another by models.Diff.Phases — each phase applied in any order, as
// P4Runtime allows within one request — every address is forwarded by
// its old route or its new one at every step, never by a third entry.
func TestAggregatedRewriteNeverMixes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	split := 0
	for i := range 150 {
		oldPlan := randomRoutes(rng, 1+rng.IntN(60))
		// The new plan changes some routes' actions, drops some, adds some.
		newPlan := slices.Clone(oldPlan)
		for j := range newPlan {
			if rng.IntN(5) == 0 {
				newPlan[j].GroupID, newPlan[j].MemberID = uint32(1+rng.IntN(3)), 0
			}
		}
		newPlan = slices.DeleteFunc(newPlan, func(models.Route) bool { return rng.IntN(10) == 0 })
		for _, r := range randomRoutes(rng, rng.IntN(10)) {
			if !slices.ContainsFunc(newPlan, func(x models.Route) bool { return x.Prefix == r.Prefix }) {
				newPlan = append(newPlan, r)
			}
		}
		oldAgg, newAgg := Aggregate(oldPlan), Aggregate(newPlan)
		diff := models.Compute(models.ForwardingState{Routes: newAgg}, models.ForwardingState{Routes: oldAgg})
		phases := diff.Phases()
		if len(phases) > 1 {
			split++
		}
		addrs := probes(oldAgg, newAgg)
		table := map[netip.Prefix]models.Route{}
		for _, r := range oldAgg {
			table[r.Prefix] = r
		}
		check := func(step string) {
			var now []models.Route
			for _, r := range table {
				now = append(now, r)
			}
			for _, a := range addrs {
				got := lookup(now, a)
				if o, n := lookup(oldAgg, a), lookup(newAgg, a); got != o && got != n {
					t.Fatalf("table %d, %s: %s goes to %q: neither its old route %q nor its new one %q", i, step, a, got, o, n)
				}
			}
		}
		for pi, ph := range phases {
			// Within a phase the switch may apply updates in any order:
			// reversed, which is the worst case for nesting.
			var ups []func()
			for _, r := range ph.Insert.Routes {
				ups = append(ups, func() { table[r.Prefix] = r })
			}
			for _, r := range ph.Modify.Routes {
				ups = append(ups, func() { table[r.Prefix] = r })
			}
			for _, r := range ph.Delete.Routes {
				ups = append(ups, func() { delete(table, r.Prefix) })
			}
			if rng.IntN(2) == 0 {
				slices.Reverse(ups)
			} else {
				rng.Shuffle(len(ups), func(a, b int) { ups[a], ups[b] = ups[b], ups[a] })
			}
			for ui, up := range ups {
				up()
				check(fmt.Sprintf("phase %d (%s), update %d", pi, ph.Name, ui))
			}
		}
		if len(table) != len(newAgg) {
			t.Fatalf("table %d: %d routes after the rewrite, want %d", i, len(table), len(newAgg))
		}
	}
	if split == 0 {
		t.Fatal("no rewrite needed more than one phase: the test does not exercise nesting")
	}
}

// BenchmarkAggregate: one k=48 core switch's routes (1,152 leaf
// prefixes), as every reconcile of it needs them.
func BenchmarkAggregate(b *testing.B) {
	topo, err := topology.FatTree(48, 100)
	if err != nil {
		b.Fatal(err)
	}
	snap, _ := topology.New(topo)
	res, err := Compute(b.Context(), snap, Request{})
	if err != nil {
		b.Fatal(err)
	}
	routes := res.Plan.Switches["core1"].Routes
	b.ReportAllocs()
	for b.Loop() {
		Aggregate(routes)
	}
	b.ReportMetric(float64(len(Aggregate(routes))), "entries")
}

// TestAggregateDisjointIsByLength: on random sorted tables with no prefix
// inside another, the one-pass aggregation makes exactly the table the
// merge by prefix length makes; on tables with one inside another it
// declines.
func TestAggregateDisjointIsByLength(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	nested := 0
	for range 300 {
		routes := models.ForwardingState{Routes: randomRoutes(rng, 10+rng.IntN(200))}.Canonical().Routes
		var disjoint []models.Route
		for _, r := range routes {
			if n := len(disjoint); n > 0 && disjoint[n-1].Prefix.Overlaps(r.Prefix) {
				continue
			}
			disjoint = append(disjoint, r)
		}
		if len(disjoint) < len(routes) {
			nested++
			if _, ok := aggregateDisjoint(routes); ok {
				t.Fatalf("aggregated a table with nested prefixes in one pass: %v", routes)
			}
		}
		got, ok := aggregateDisjoint(disjoint)
		if !ok {
			t.Fatalf("declined a table of disjoint prefixes: %v", disjoint)
		}
		if want := aggregateByLength(disjoint); !slices.Equal(got, want) {
			t.Fatalf("one pass made\n%v\nby length\n%v\nfrom %v", got, want, disjoint)
		}
	}
	if nested == 0 {
		t.Fatal("no table had nested prefixes: the declining is not exercised")
	}
}
