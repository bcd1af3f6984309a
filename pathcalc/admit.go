package pathcalc

import (
	"context"
	"fmt"
	"math"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// Reservation is bandwidth already granted on a path.
type Reservation struct {
	Demand
	Path []models.Endpoint // as Placement.Paths gives it
}

// AdmitRequest asks whether one more demand fits.
type AdmitRequest struct {
	Reserved  []Reservation
	Demand    Demand
	DownLinks map[models.LinkID]bool
	// Headroom is the fraction of every link kept unreserved (0.05 keeps 5%).
	Headroom float64
}

// Admission is the answer: the path the demand would take and whether its
// bandwidth fits under every link's reservable capacity, and if not, where
// it does not and how much is free there.
type Admission struct {
	Fits bool              `json:"fits"`
	Path []models.Endpoint `json:"path"`
	// Bottleneck is the link direction (or NIC) with the least reservable
	// bandwidth left on the chosen path, and FreeGbps what is left there.
	Bottleneck string  `json:"bottleneck"`
	FreeGbps   float64 `json:"free_gbps"`
	// MLU is the highest reserved utilization on the path with the demand added.
	MLU    float64 `json:"mlu"`
	Reason string  `json:"reason,omitempty"`
}

// Admit picks the shortest path with the most reservable bandwidth left for
// a demand, given what is reserved, and says whether the demand fits. It
// changes nothing: reserving is the caller's business, so a dry run is the
// same call.
func Admit(ctx context.Context, snap *topology.Snapshot, req AdmitRequest) (Admission, error) {
	if req.Headroom < 0 || req.Headroom >= 1 {
		return Admission{}, fmt.Errorf("%w: headroom must be in [0, 1)", models.ErrInvalid)
	}
	if !(req.Demand.Gbps > 0) {
		return Admission{}, fmt.Errorf("%w: demand must be positive", models.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return Admission{}, err
	}
	n := newNetwork(snap, req.DownLinks)
	reserved := make([]float64, len(n.capacity))
	for _, r := range req.Reserved {
		reserved[n.nicTx[r.Src.Name]] += r.Gbps
		for _, e := range r.Path {
			if x, ok := n.egress[e]; ok {
				reserved[x] += r.Gbps
			}
		}
	}
	d := req.Demand
	candidates := [][]int{nil}
	if d.Src.Attach.Switch != d.Dst.Attach.Switch {
		candidates = n.leafPaths(d.Src.Attach.Switch, d.Dst.Attach.Switch)
		if len(candidates) == 0 {
			return Admission{Reason: fmt.Sprintf("no working path from %s to %s", d.Src.Name, d.Dst.Name)}, nil
		}
	}
	best, bestFree, bestAt := -1, math.Inf(-1), -1
	for c, p := range candidates {
		free, at := math.Inf(1), -1
		for _, r := range n.route(d.Src, d.Dst, p) {
			if f := n.capacity[r]*(1-req.Headroom) - reserved[r]; f < free {
				free, at = f, r
			}
		}
		if free > bestFree {
			best, bestFree, bestAt = c, free, at
		}
	}
	a := Admission{Fits: bestFree >= d.Gbps-1e-9, Bottleneck: n.resources[bestAt].String(), FreeGbps: math.Max(bestFree, 0)}
	route := n.route(d.Src, d.Dst, candidates[best])
	for _, r := range route[1:] {
		a.Path = append(a.Path, n.resources[r].egress)
	}
	for _, r := range route {
		a.MLU = math.Max(a.MLU, (reserved[r]+d.Gbps)/n.capacity[r])
	}
	if !a.Fits {
		a.Reason = fmt.Sprintf("%.1f Gb/s asked, at most %.1f Gb/s reservable on %s", d.Gbps, a.FreeGbps, a.Bottleneck)
	}
	return a, nil
}
