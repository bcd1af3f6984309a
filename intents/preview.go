package intents

import (
	"maps"
	"slices"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
	"github.com/accelnet/accelnet/store"
)

// Preview re-places the live intents for a fabric with down links,
// changing nothing: the reserved MLU after, how many would move, and which
// would find no room.
func (m *Manager) Preview(down map[models.LinkID]bool) (mlu float64, moved int, degraded []string, err error) {
	m.mu.Lock() // books cache paths as they go
	defer m.mu.Unlock()
	if m.p.snap == nil {
		return 0, 0, nil, store.ErrNoTopology
	}
	book, err := pathcalc.NewBook(m.p.snap, down, m.cfg.Headroom)
	if err != nil {
		return 0, 0, nil, err
	}
	var moving []*entry
	for _, id := range slices.Sorted(maps.Keys(m.p.all)) {
		e := m.p.all[id]
		if !e.pinned {
			continue
		}
		ok := true
		for i, f := range e.flows {
			if i >= len(e.in.Status.Flows) || !book.Usable(f.src, e.in.Status.Flows[i].Path) {
				ok = false
				break
			}
		}
		if !ok {
			moving = append(moving, e)
			continue
		}
		for i, f := range e.flows {
			_ = book.Reserve(f.src, e.in.Status.Flows[i].Path, f.gbps)
		}
	}
	slices.SortStableFunc(moving, func(x, y *entry) int { return y.in.Spec.Priority - x.in.Spec.Priority })
	for _, e := range moving {
		cons, err := m.p.constraints(e)
		demands := make([]pathcalc.Demand, len(e.flows))
		for i, f := range e.flows {
			demands[i] = pathcalc.Demand{Src: f.src, Dst: f.dst, Gbps: f.gbps}
		}
		fit := book.Fit(demands, cons)
		if err != nil || !fit.Fits {
			degraded = append(degraded, e.in.ID)
			continue
		}
		for i, p := range fit.Paths {
			_ = book.Reserve(e.flows[i].src, p, e.flows[i].gbps)
		}
		moved++
	}
	return book.MLU(), moved, degraded, nil
}
