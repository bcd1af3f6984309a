package pathcalc

import (
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// Hops is a fabric's switches numbered once, with their working links as
// index lists, for many breadth-first searches toward different
// destinations: a rollout after a link change at k=32 needs about a
// thousand, and a search keyed by switch names in maps cost a millisecond
// each (most of the rollout's planning).
type Hops struct {
	index map[models.SwitchID]int
	adj   [][]int32
}

// NewHops numbers snap's switches and keeps the links that are not down.
func NewHops(snap *topology.Snapshot, down map[models.LinkID]bool) *Hops {
	switches := snap.Switches()
	h := &Hops{index: make(map[models.SwitchID]int, len(switches)), adj: make([][]int32, len(switches))}
	for i, sw := range switches {
		h.index[sw.Name] = i
	}
	for i, sw := range switches {
		snap.EachNeighbor(sw.Name, func(a topology.Adjacency) {
			if len(down) > 0 && down[a.Link] {
				return
			}
			if j, ok := h.index[a.Peer]; ok {
				h.adj[i] = append(h.adj[i], int32(j))
			}
		})
	}
	return h
}

// To is every switch's hop distance to dst.
func (h *Hops) To(dst models.SwitchID) Dist {
	d := make([]int32, len(h.adj))
	for i := range d {
		d[i] = -1
	}
	start, ok := h.index[dst]
	if !ok {
		return Dist{index: h.index, d: d}
	}
	d[start] = 0
	queue := make([]int32, 1, len(h.adj))
	queue[0] = int32(start)
	for head := 0; head < len(queue); head++ {
		cur := queue[head]
		for _, n := range h.adj[cur] {
			if d[n] < 0 {
				d[n] = d[cur] + 1
				queue = append(queue, n)
			}
		}
	}
	return Dist{index: h.index, d: d}
}

// Dist is every switch's hop distance toward one destination (Hops.To,
// Result.Distances): d by switch, numbered by index.
type Dist struct {
	index map[models.SwitchID]int
	d     []int32
}

// Of is sw's distance, and false when sw cannot reach the destination (or
// is not in the fabric).
func (d Dist) Of(sw models.SwitchID) (int, bool) {
	if d.index == nil {
		return 0, false
	}
	i, ok := d.index[sw]
	if !ok || d.d[i] < 0 {
		return 0, false
	}
	return int(d.d[i]), true
}
