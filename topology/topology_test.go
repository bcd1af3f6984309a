package topology

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/accelnet/accelnet/models"
)

var update = flag.Bool("update", false, "rewrite generated example topology files")

func TestLeafSpineShape(t *testing.T) {
	topo, err := LeafSpine(4, 8, 8, 400)
	if err != nil {
		t.Fatal(err)
	}
	if len(topo.Switches) != 12 || len(topo.Links) != 32 || len(topo.Hosts) != 64 {
		t.Fatalf("got %d switches, %d links, %d hosts", len(topo.Switches), len(topo.Links), len(topo.Hosts))
	}
	snap, err := New(topo)
	if err != nil {
		t.Fatal(err)
	}
	for _, sw := range snap.Switches() {
		want := 8 // a spine reaches every leaf
		if sw.Role == models.RoleLeaf {
			want = 4
			if got := len(snap.HostsOn(sw.Name)); got != 8 {
				t.Errorf("%s has %d hosts", sw.Name, got)
			}
		}
		if got := len(snap.Neighbors(sw.Name)); got != want {
			t.Errorf("%s has %d neighbors, want %d", sw.Name, got, want)
		}
	}
}

func TestFatTreeShape(t *testing.T) {
	for _, k := range []int{4, 8, 16} {
		topo, err := FatTree(k, 100)
		if err != nil {
			t.Fatal(err)
		}
		// Al-Fares et al.: 5k²/4 switches, k³/4 hosts, k³/2 switch links.
		if len(topo.Switches) != 5*k*k/4 || len(topo.Hosts) != k*k*k/4 || len(topo.Links) != k*k*k/2 {
			t.Errorf("k=%d: %d switches, %d hosts, %d links", k, len(topo.Switches), len(topo.Hosts), len(topo.Links))
		}
		snap, err := New(topo)
		if err != nil {
			t.Fatal(err)
		}
		for _, sw := range snap.Switches() {
			ports := len(snap.Ports(sw.Name))
			if ports != k {
				t.Errorf("k=%d: %s uses %d ports, want k", k, sw.Name, ports)
				break
			}
		}
	}
}

func TestBuilderLimits(t *testing.T) {
	for name, err := range map[string]error{
		"odd k":        func() error { _, err := FatTree(5, 100); return err }(),
		"no spines":    func() error { _, err := LeafSpine(0, 4, 4, 100); return err }(),
		"too many":     func() error { _, err := LeafSpine(10, 4, 250, 100); return err }(),
		"zero speed":   func() error { _, err := LeafSpine(1, 2, 1, 0); return err }(),
		"bad spec":     func() error { _, err := ParseSpec("torus:4"); return err }(),
		"spec numbers": func() error { _, err := ParseSpec("leafspine:4xax2"); return err }(),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if topo, err := ParseSpec("leafspine:8x4x2@100"); err != nil || len(topo.Hosts) != 32 || topo.Links[0].Gbps != 100 {
		t.Errorf("leafspine:8x4x2@100 → %d hosts, %v", len(topo.Hosts), err)
	}
}

func TestParseReportsLineAndField(t *testing.T) {
	tests := []struct {
		name, file string
		line       int
		want       string
	}{
		{"unknown top-level field", "name: x\nswitchs: []\n", 2, `unknown field "switchs"`},
		{"missing device id", "switches:\n  - {name: s1, role: spine}\n", 2, "switches[0].device_id: "},
		{"bad device id", "switches:\n  - name: s1\n    role: spine\n    device_id: one\n", 4, "switches[0].device_id"},
		{"bad link syntax", "defaults: {link_gbps: 100}\nswitches:\n  - {name: a, role: spine, device_id: 1}\nlinks:\n  - a:1 -- b:1\n", 5, "links[0]"},
		{"link without speed", "switches:\n  - {name: a, role: spine, device_id: 1}\n  - {name: b, role: leaf, device_id: 2}\nlinks:\n  - a:1 <-> b:1\n", 5, "no speed"},
		{"bad host ip", "switches:\n  - {name: l, role: leaf, device_id: 1}\nhosts:\n  - {name: h, ip: 10.0.0.300, attach: \"l:1\", gbps: 100}\n", 4, "hosts[0].ip"},
		{"unknown switch in link", "defaults: {link_gbps: 100}\nswitches:\n  - {name: a, role: spine, device_id: 1}\nlinks:\n  - a:1 <-> b:1\n", 5, `unknown switch "b"`},
		{"not yaml", "switches: [\n", 0, "did not find expected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.file))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("want error containing %q, got %v", tt.want, err)
			}
			if !errors.Is(err, models.ErrInvalid) {
				t.Errorf("%v does not wrap ErrInvalid", err)
			}
			if tt.line > 0 {
				var fe *FileError
				if !errors.As(err, &fe) || fe.Line != tt.line {
					t.Errorf("want an error at line %d, got %v", tt.line, err)
				}
			}
		})
	}
}

func TestFormatParseRoundTrip(t *testing.T) {
	topo, err := FatTree(4, 100)
	if err != nil {
		t.Fatal(err)
	}
	topo.Switches[0].P4RTAddr = "127.0.0.1:9559"
	back, err := Parse(Format(topo))
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Switches) != len(topo.Switches) || back.Switches[0] != topo.Switches[0] || back.Links[7] != topo.Links[7] || back.Hosts[3] != topo.Hosts[3] {
		t.Fatal("round trip changed the topology")
	}
}

// TestExampleFiles keeps deploy/topologies/ loadable; -update regenerates the
// builder-made ones.
func TestExampleFiles(t *testing.T) {
	dir := filepath.Join("..", "deploy", "topologies")
	generated := map[string]func() (models.Topology, error){
		"fattree-4.yaml":       func() (models.Topology, error) { return FatTree(4, 400) },
		"leafspine-8x8x4.yaml": func() (models.Topology, error) { return LeafSpine(4, 8, 8, 400) },
	}
	for name, build := range generated {
		topo, err := build()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		want := append([]byte("# Generated by `go test ./topology -update`; fabricsim fills in addresses.\n"), Format(topo)...)
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./topology -update)", err)
		}
		if string(got) != string(want) {
			t.Errorf("%s is stale: run go test ./topology -update", path)
		}
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("example files: %v %v", files, err)
	}
	for _, f := range files {
		if _, err := LoadFile(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestWalksYieldWhatTheListsHold: AllSwitches and AllFabricLinks yield
// what Switches and FabricLinks copy, in the same order, stop when the
// loop stops, and the counts agree.
func TestWalksYieldWhatTheListsHold(t *testing.T) {
	topo, err := FatTree(4, 100)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := New(topo)
	if err != nil {
		t.Fatal(err)
	}
	var sws []models.Switch
	for sw := range snap.AllSwitches() {
		sws = append(sws, sw)
	}
	if !slices.Equal(sws, snap.Switches()) || snap.NumSwitches() != len(topo.Switches) {
		t.Errorf("AllSwitches yielded %d switches, NumSwitches %d; the topology has %d", len(sws), snap.NumSwitches(), len(topo.Switches))
	}
	var links []models.Link
	for l := range snap.AllFabricLinks() {
		links = append(links, l)
	}
	if !slices.Equal(links, snap.FabricLinks()) || snap.NumFabricLinks() != len(links) || len(links) != 32 {
		t.Errorf("AllFabricLinks yielded %d links, FabricLinks %d, NumFabricLinks %d; a k=4 fat-tree has 32", len(links), len(snap.FabricLinks()), snap.NumFabricLinks())
	}
	n := 0
	for range snap.AllFabricLinks() {
		if n++; n == 3 {
			break
		}
	}
	for range snap.AllSwitches() {
		if n++; n == 6 {
			break
		}
	}
	if n != 6 {
		t.Errorf("the walks went on after their loops stopped: %d", n)
	}
}

// BenchmarkNew is loading a k=48 fat-tree (2,880 switches, 27,648 hosts):
// what every start and every topology change pays before routes are
// computed.
//
//	go test ./topology -run '^$' -bench New -benchtime 10x
func BenchmarkNew(b *testing.B) {
	topo, err := FatTree(48, 100)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := New(topo); err != nil {
			b.Fatal(err)
		}
	}
}
