package pathcalc

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

var update = flag.Bool("update", false, "rewrite golden files")

func compute(t *testing.T, topo models.Topology, lim Limits) Result {
	t.Helper()
	snap, err := topology.New(topo)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Compute(context.Background(), snap, Request{Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	for sw, st := range res.Plan.Switches {
		if err := st.Validate(); err != nil {
			t.Fatalf("%s: computed state is invalid: %v", sw, err)
		}
	}
	return res
}

// TestGolden pins the full plan of small fabrics; refresh with -update.
func TestGolden(t *testing.T) {
	ls, _ := topology.LeafSpine(2, 2, 2, 100)
	ft, _ := topology.FatTree(4, 100)
	for name, topo := range map[string]models.Topology{"leafspine-2x2x2": ls, "fattree-4": ft} {
		t.Run(name, func(t *testing.T) {
			res := compute(t, topo, Limits{})
			got, err := json.MarshalIndent(res.Plan, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".golden.json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./pathcalc -update)", err)
			}
			if string(want) != string(got) {
				t.Errorf("plan differs from %s; if intended, run go test ./pathcalc -update", path)
			}
		})
	}
}

// TestFatTreeECMPWidth checks the multipath structure of a k=8 fat-tree:
// leaves spread inter-pod traffic over k/2 spines, spines over k/2 cores,
// cores have exactly one way down.
func TestFatTreeECMPWidth(t *testing.T) {
	const k = 8
	topo, _ := topology.FatTree(k, 100)
	res := compute(t, topo, Limits{})
	snap, _ := topology.New(topo)
	remote := netip.MustParsePrefix("10.0.32.0/24") // pod 8, leaf 1 (pods hold aligned blocks of 4 /24s)
	for _, sw := range snap.Switches() {
		st := res.Plan.Switches[sw.Name]
		var route models.Route
		for _, r := range st.Routes {
			if r.Prefix == remote {
				route = r
			}
		}
		if sw.Pod == 8 {
			continue // inside the destination pod paths are shorter
		}
		want := k / 2
		if sw.Role == models.RoleCore {
			want = 1
		}
		got := 1
		if route.GroupID != 0 {
			for _, g := range st.Groups {
				if g.ID == route.GroupID {
					got = len(g.Members)
				}
			}
		} else if route.MemberID == 0 {
			t.Fatalf("%s has no route to %s", sw.Name, remote)
		}
		if got != want {
			t.Errorf("%s reaches %s over %d ports, want %d", sw.Name, remote, got, want)
		}
	}
}

func TestGroupsSharedAndStable(t *testing.T) {
	topo, _ := topology.LeafSpine(4, 8, 2, 100)
	a := compute(t, topo, Limits{})
	// All 7 remote prefixes of a leaf share one group over the 4 spines.
	leaf := a.Plan.Switches["leaf1"]
	if len(leaf.Groups) != 1 || len(leaf.Groups[0].Members) != 4 {
		t.Fatalf("leaf1 groups = %+v", leaf.Groups)
	}
	// Group IDs do not depend on unrelated parts of the fabric.
	topo2, _ := topology.LeafSpine(4, 9, 2, 100)
	b := compute(t, topo2, Limits{})
	if a.Plan.Switches["leaf1"].Groups[0].ID != b.Plan.Switches["leaf1"].Groups[0].ID {
		t.Error("group ID changed when a leaf was added")
	}
}

func TestLimits(t *testing.T) {
	topo, _ := topology.LeafSpine(8, 4, 2, 100)
	res := compute(t, topo, Limits{MaxGroupSize: 4})
	if len(res.Warnings) == 0 || !strings.Contains(res.Warnings[0].Message, "max group size is 4") {
		t.Errorf("warnings = %+v", res.Warnings)
	}
	for _, g := range res.Plan.Switches["leaf1"].Groups {
		if len(g.Members) > 4 {
			t.Errorf("group %d has %d members over the limit", g.ID, len(g.Members))
		}
	}
	snap, _ := topology.New(topo)
	if _, err := Compute(context.Background(), snap, Request{Limits: Limits{RouteEntries: 3}}); !errors.Is(err, ErrTableFull) {
		t.Errorf("route table limit: got %v", err)
	}
	// A k=8 fat-tree's switches route 32 leaves; aggregated, at most 16.
	ft, _ := topology.FatTree(8, 100)
	snap, _ = topology.New(ft)
	if _, err := Compute(context.Background(), snap, Request{Limits: Limits{RouteEntries: 16, PerLeafRoutes: true}}); !errors.Is(err, ErrTableFull) {
		t.Errorf("per-leaf routes over the limit: got %v", err)
	}
	if _, err := Compute(context.Background(), snap, Request{Limits: Limits{RouteEntries: 16}}); err != nil {
		t.Errorf("aggregated routes within the limit: %v", err)
	}
	if _, err := Compute(context.Background(), snap, Request{Limits: Limits{RouteEntries: 6}}); !errors.Is(err, ErrTableFull) {
		t.Errorf("aggregated routes over the limit: got %v", err)
	}
}

func TestDownLinksAreAvoided(t *testing.T) {
	topo, _ := topology.LeafSpine(2, 2, 1, 100)
	snap, _ := topology.New(topo)
	down := topo.Links[0] // leaf1 <-> spine1
	res, err := Compute(context.Background(), snap, Request{DownLinks: map[models.LinkID]bool{down.ID(): true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Plan.Switches["leaf1"].Routes {
		if r.GroupID != 0 || r.MemberID == down.A.Port {
			t.Errorf("leaf1 route %+v still uses the down link", r)
		}
	}
}

// FuzzParseThenCompute: any topology file that parses routes without panicking.
func FuzzParseThenCompute(f *testing.F) {
	for _, name := range []string{"lab-2x2.yaml", "fattree-4.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "deploy", "topologies", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("switches:\n  - {name: a, role: leaf, device_id: 1}\nhosts:\n  - {name: h, ip: 10.0.0.1, attach: \"a:1\", gbps: 1}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		topo, err := topology.Parse(data)
		if err != nil {
			return
		}
		snap, err := topology.New(topo)
		if err != nil {
			t.Fatalf("Parse accepted a topology New rejects: %v", err)
		}
		res, err := Compute(context.Background(), snap, Request{Limits: Limits{MaxGroupSize: 64}})
		if err != nil {
			return
		}
		for sw, st := range res.Plan.Switches {
			if err := st.Validate(); err != nil {
				t.Fatalf("%s: %v", sw, err)
			}
		}
	})
}
