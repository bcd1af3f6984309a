package northbound

import (
	"slices"
	"testing"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
	"github.com/accelnet/accelnet/topology/topotest"
)

// TestHistoryFollowsTheTopology: every link keeps its utilization and
// every switch its traffic out, at most keep points each; the series of
// a link or switch no longer in the topology go.
func TestHistoryFollowsTheTopology(t *testing.T) {
	snapOf := func(spines, leaves int) *topology.Snapshot { return topotest.LeafSpine(t, spines, leaves, 1) }
	u := 0.0 // every link's utilization this round
	load := func(l models.Link) api.LinkLoad { return api.LinkLoad{Utilization: u, ABbps: 1e9, BAbps: 2e9} }
	h := &history{interval: time.Second, keep: 3, series: map[historyKey]*series{}}
	big := snapOf(2, 3)
	h.record(time.Unix(0, 0), big, load)
	if points, _ := h.get(historyKey{link: big.Links()[0].ID()}); len(points) != 1 {
		t.Fatalf("after one round: %v, want its one point", points)
	}
	for i := range 5 {
		u = float64(i) / 10
		h.record(time.Unix(int64(i), 0), big, load)
	}
	link := big.Links()[0]
	points, ok := h.get(historyKey{link: link.ID()})
	want3 := []api.HistoryPoint{{T: 2, V: 0.2}, {T: 3, V: 0.3}, {T: 4, V: 0.4}}
	if !ok || !slices.Equal(points, want3) {
		t.Fatalf("%s: %v (kept %v); want the last 3 points, oldest first: %v", link.ID(), points, ok, want3)
	}
	// Every switch sends on each of its links: 1 Gb/s as A, 2 as B.
	sw := link.A.Switch
	want := 0.0
	for _, l := range big.Links() {
		if l.A.Switch == sw {
			want += 1e9
		}
		if l.B.Switch == sw {
			want += 2e9
		}
	}
	if points, _ := h.get(historyKey{sw: sw}); len(points) != 3 || points[0].V != want {
		t.Fatalf("%s: %v, want %v b/s out", sw, points, want)
	}
	small := snapOf(2, 2)
	h.record(time.Unix(5, 0), small, load)
	if _, ok := h.get(historyKey{sw: "leaf3"}); ok {
		t.Fatal("leaf3 left the topology and kept its history")
	}
	if len(h.series) != len(small.Links())+len(small.Switches()) {
		t.Fatalf("%d series, want one per link and switch of the topology (%d)", len(h.series), len(small.Links())+len(small.Switches()))
	}
	// What joins the topology has the points since it joined, no more.
	u = 0.37
	h.record(time.Unix(6, 0), big, load)
	if points, _ := h.get(historyKey{sw: "leaf3"}); !slices.Equal(points, []api.HistoryPoint{{T: 6, V: want}}) {
		t.Fatalf("leaf3 back: %v, want one point", points)
	}
	if points, _ := h.get(historyKey{link: link.ID()}); len(points) != 3 || points[2] != (api.HistoryPoint{T: 6, V: 0.37}) {
		t.Fatalf("%s: %v, want 3 points ending at 0.37", link.ID(), points)
	}
}

// failingFabric is a fabric whose link failure is being rerouted, or
// not (failing), and that counts the links' load read.
type failingFabric struct {
	Fabric
	snap    *topology.Snapshot
	failing bool
	reads   int
}

func (f *failingFabric) HandlingFailure() bool                 { return f.failing }
func (f *failingFabric) Snapshot() (*topology.Snapshot, int64) { return f.snap, 1 }
func (f *failingFabric) LinkLoad(models.Link) api.LinkLoad {
	f.reads++
	return api.LinkLoad{Utilization: 0.5}
}

// TestHistorySkipsRoundsWhileAFailureIsRerouted: no link's load is read
// for the history while a failure is rerouted; the round after it is
// recorded at its own time.
func TestHistorySkipsRoundsWhileAFailureIsRerouted(t *testing.T) {
	f := &failingFabric{snap: topotest.LeafSpine(t, 2, 2, 1), failing: true}
	a := &server{opts: Options{Fabric: f}, history: &history{interval: time.Second, keep: 3, series: map[historyKey]*series{}}}
	if a.historyRound(time.Unix(1, 0)) || f.reads != 0 {
		t.Fatalf("recorded during a failure (%d links' load read)", f.reads)
	}
	f.failing = false
	if !a.historyRound(time.Unix(2, 0)) || f.reads != len(f.snap.Links()) {
		t.Fatalf("after the failure: %d links' load read, want %d", f.reads, len(f.snap.Links()))
	}
	points, _ := a.history.get(historyKey{link: f.snap.Links()[0].ID()})
	if want := []api.HistoryPoint{{T: 2, V: 0.5}}; !slices.Equal(points, want) {
		t.Fatalf("history %v, want %v", points, want)
	}
}
