package fabricsim

import (
	"container/heap"
	"slices"
)

// maxMinFair gives delivered flows their max-min fair rates by progressive
// filling: all unfrozen flows grow together; when a resource (a directional
// link or a NIC) fills, the flows on it freeze at the fill level; a flow
// that reaches its demand freezes there. Events come off a heap, so the cost
// is O(F·P·log R) for F flows of P resources each over R resources.
func maxMinFair(flows []*flowState, capacity func(string) float64) {
	type resource struct {
		cap, frozen float64
		active      int
		flows       []int
		version     int
	}
	var rs []resource
	index := map[string]int{}
	flowRes := make([][]int, len(flows))
	active := make([]bool, len(flows))
	var live []int
	for i, fl := range flows {
		fl.RateGbps = 0
		if !fl.Delivered || fl.Spec.DemandGbps <= 0 {
			continue
		}
		active[i] = true
		live = append(live, i)
		for _, name := range fl.resources {
			r, ok := index[name]
			if !ok {
				r = len(rs)
				index[name] = r
				rs = append(rs, resource{cap: capacity(name)})
			}
			rs[r].active++
			rs[r].flows = append(rs[r].flows, i)
			flowRes[i] = append(flowRes[i], r)
		}
	}
	level := func(r int) float64 { return (rs[r].cap - rs[r].frozen) / float64(rs[r].active) }
	h := &levelHeap{}
	for r := range rs {
		heap.Push(h, levelItem{level: level(r), res: r, version: 0})
	}
	// Flows in order of demand: the next one to be satisfied is the first active one.
	byDemand := slices.Clone(live)
	slices.SortFunc(byDemand, func(a, b int) int {
		switch da, db := flows[a].Spec.DemandGbps, flows[b].Spec.DemandGbps; {
		case da < db:
			return -1
		case da > db:
			return 1
		}
		return 0
	})
	freeze := func(i int, rate float64) {
		active[i] = false
		flows[i].RateGbps = max(rate, 0)
		for _, r := range flowRes[i] {
			rs[r].frozen += flows[i].RateGbps
			rs[r].active--
			rs[r].version++
			if rs[r].active > 0 {
				heap.Push(h, levelItem{level: level(r), res: r, version: rs[r].version})
			}
		}
	}
	remaining, next := len(live), 0
	for remaining > 0 {
		for next < len(byDemand) && !active[byDemand[next]] {
			next++
		}
		// The lowest valid resource level.
		resLevel, res := -1.0, -1
		for h.Len() > 0 {
			top := (*h)[0]
			if top.version != rs[top.res].version || rs[top.res].active == 0 {
				heap.Pop(h)
				continue
			}
			resLevel, res = top.level, top.res
			break
		}
		if next < len(byDemand) && (res < 0 || flows[byDemand[next]].Spec.DemandGbps <= resLevel) {
			i := byDemand[next]
			freeze(i, flows[i].Spec.DemandGbps)
			remaining--
			continue
		}
		if res < 0 {
			break
		}
		heap.Pop(h)
		for _, i := range slices.Clone(rs[res].flows) {
			if active[i] {
				freeze(i, resLevel)
				remaining--
			}
		}
	}
}

type levelItem struct {
	level   float64
	res     int
	version int
}

type levelHeap []levelItem

func (h levelHeap) Len() int           { return len(h) }
func (h levelHeap) Less(i, j int) bool { return h[i].level < h[j].level }
func (h levelHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *levelHeap) Push(x any)        { *h = append(*h, x.(levelItem)) }
func (h *levelHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
