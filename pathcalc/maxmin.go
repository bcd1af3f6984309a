package pathcalc

import (
	"cmp"
	"container/heap"
	"slices"
)

// MaxMinFair returns the max-min fair rates of flows sharing resources
// (directional links, NICs): flow i asks for demand[i] and uses the
// resources listed in uses[i]; resource r holds capacity[r]. Progressive
// filling: every unfrozen flow grows at the same pace; when a resource
// fills, the flows on it freeze; a flow that reaches its demand freezes
// there. Events come off a heap, so the cost is O(F·P·log R). fabricsim's
// dataplane and the evaluator both use it, so their figures agree.
func MaxMinFair(capacity []float64, demand []float64, uses [][]int) []float64 {
	type resource struct {
		frozen  float64
		active  int
		flows   []int
		version int
	}
	rs := make([]resource, len(capacity))
	rate := make([]float64, len(demand))
	active := make([]bool, len(demand))
	var live []int
	for i, d := range demand {
		if d <= 0 {
			continue
		}
		active[i] = true
		live = append(live, i)
		for _, r := range uses[i] {
			rs[r].active++
			rs[r].flows = append(rs[r].flows, i)
		}
	}
	level := func(r int) float64 { return (capacity[r] - rs[r].frozen) / float64(rs[r].active) }
	h := &levelHeap{}
	for r := range rs {
		if rs[r].active > 0 {
			heap.Push(h, levelItem{level: level(r), res: r})
		}
	}
	byDemand := slices.Clone(live)
	slices.SortFunc(byDemand, func(a, b int) int { return cmp.Compare(demand[a], demand[b]) })
	freeze := func(i int, x float64) {
		active[i] = false
		rate[i] = max(x, 0)
		for _, r := range uses[i] {
			rs[r].frozen += rate[i]
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
		if next < len(byDemand) && (res < 0 || demand[byDemand[next]] <= resLevel) {
			freeze(byDemand[next], demand[byDemand[next]])
			remaining--
			continue
		}
		if res < 0 {
			break // flows that use no resource: unconstrained, left at 0
		}
		heap.Pop(h)
		for _, i := range slices.Clone(rs[res].flows) {
			if active[i] {
				freeze(i, resLevel)
				remaining--
			}
		}
	}
	return rate
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
