package fabricsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"

	"github.com/accelnet/accelnet/models"
)

// ErrUnknown is returned for flows, hosts or links the fabric does not have.
var ErrUnknown = errors.New("fabricsim: unknown")

// AddFlows offers flows to the dataplane and returns their IDs. Every flow
// is checked first; on any error none is added.
func (f *Fabric) AddFlows(specs []FlowSpec) ([]uint64, error) {
	for i, s := range specs {
		if _, err := f.snap.HostByIP(s.Src); err != nil {
			return nil, fmt.Errorf("flow %d: source %s: %w", i, s.Src, ErrUnknown)
		}
		if _, err := f.snap.HostByIP(s.Dst); err != nil {
			return nil, fmt.Errorf("flow %d: destination %s: %w", i, s.Dst, ErrUnknown)
		}
		if s.Src == s.Dst {
			return nil, fmt.Errorf("%w: flow %d: source and destination are the same host", models.ErrInvalid, i)
		}
		if !(s.DemandGbps > 0) {
			return nil, fmt.Errorf("%w: flow %d: demand_gbps must be positive", models.ErrInvalid, i)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := make([]uint64, len(specs))
	for i, s := range specs {
		f.nextFlow++
		ids[i] = f.nextFlow
		f.flows[f.nextFlow] = &flowState{FlowStatus: FlowStatus{ID: f.nextFlow, Spec: s}}
	}
	f.dirty.Store(true)
	return ids, nil
}

// RemoveFlows stops flows by ID; nil stops every flow.
func (f *Fabric) RemoveFlows(ids []uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ids == nil {
		clear(f.flows)
	}
	for _, id := range ids {
		delete(f.flows, id)
	}
	f.dirty.Store(true)
}

// Flows returns every flow's current path and rate, by ID. Changes since the
// last counter interval are applied first.
func (f *Fabric) Flows() []FlowStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dirty.Swap(false) {
		f.recomputeLocked()
	}
	out := make([]FlowStatus, 0, len(f.flows))
	for _, fl := range f.flows {
		st := fl.FlowStatus
		st.Hops = slices.Clone(st.Hops)
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b FlowStatus) int { return int(a.ID) - int(b.ID) })
	return out
}

// SetLinkUp takes a link down or brings it back.
func (f *Fabric) SetLinkUp(id models.LinkID, up bool) error {
	if _, err := f.snap.Link(id); err != nil {
		return fmt.Errorf("link %s: %w", id, ErrUnknown)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if up {
		delete(f.linkDown, id)
	} else {
		f.linkDown[id] = true
	}
	f.dirty.Store(true)
	return nil
}

// Permutation returns a random permutation workload: every host sends one
// flow of demandGbps to a distinct host on another leaf, with qps flows
// (queue pairs, each its own UDP source port) per host pair.
func (f *Fabric) Permutation(seed uint64, demandGbps float64, qps int) ([]FlowSpec, error) {
	hosts := f.snap.Hosts()
	if qps < 1 {
		qps = 1
	}
	leaves := map[models.SwitchID]bool{}
	for _, h := range hosts {
		leaves[h.Attach.Switch] = true
	}
	if len(leaves) < 2 {
		return nil, fmt.Errorf("%w: a permutation needs hosts on at least two leaves", models.ErrInvalid)
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	// Shuffle until no host maps to its own leaf; retry a bounded number of
	// times, then repair by swapping.
	perm := rng.Perm(len(hosts))
	for i := range perm {
		for tries := 0; hosts[i].Attach.Switch == hosts[perm[i]].Attach.Switch && tries < 4*len(hosts); tries++ {
			j := rng.IntN(len(hosts))
			if hosts[j].Attach.Switch != hosts[perm[i]].Attach.Switch && hosts[i].Attach.Switch != hosts[perm[j]].Attach.Switch {
				perm[i], perm[j] = perm[j], perm[i]
			}
		}
	}
	var specs []FlowSpec
	for i, j := range perm {
		if hosts[i].Attach.Switch == hosts[j].Attach.Switch {
			continue // could not be repaired (tiny fabrics); leave the host idle
		}
		for q := 0; q < qps; q++ {
			specs = append(specs, FlowSpec{
				Src:        hosts[i].IP,
				Dst:        hosts[j].IP,
				SrcPort:    uint16(49152 + rng.IntN(16384)),
				DestQP:     uint32(rng.IntN(1 << 24)),
				DemandGbps: demandGbps / float64(qps),
			})
		}
	}
	return specs, nil
}

// Handler is the control API, to mount under /sim/v1/:
//
//	GET    /sim/v1/switches               switches, addresses, entry counts, writes
//	GET    /sim/v1/flows                  every flow's path, drop reason and rate
//	POST   /sim/v1/flows                  {"flows":[FlowSpec...]} → {"ids":[...]}
//	DELETE /sim/v1/flows                  stop every flow
//	POST   /sim/v1/workloads/permutation  {"seed":1,"gbps":400,"qps":1} → {"ids":[...]}
//	POST   /sim/v1/links                  {"link":"leaf1:9<->spine1:1","up":false}
func (f *Fabric) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /sim/v1/switches", func(w http.ResponseWriter, r *http.Request) {
		type sw struct {
			Name     models.SwitchID `json:"name"`
			DeviceID uint64          `json:"device_id"`
			Addr     string          `json:"addr"`
			Routes   int             `json:"routes"`
			FlowPins int             `json:"flow_pins"`
			Writes   int64           `json:"write_rpcs"`
			Updates  int64           `json:"write_updates"`
		}
		var out []sw
		for _, s := range f.order {
			rpcs, ups := s.WriteStats()
			out = append(out, sw{Name: s.name, DeviceID: s.deviceID, Addr: s.Addr(),
				Routes: s.Entries("Ingress.ipv4_lpm"), FlowPins: s.Entries("Ingress.flow_pin"), Writes: rpcs, Updates: ups})
		}
		writeJSON(w, http.StatusOK, map[string]any{"switches": out})
	})
	mux.HandleFunc("GET /sim/v1/flows", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"flows": f.Flows()})
	})
	mux.HandleFunc("POST /sim/v1/flows", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Flows []FlowSpec `json:"flows"`
		}
		if !readJSON(w, r, &req) {
			return
		}
		ids, err := f.AddFlows(req.Flows)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, map[string]any{"ids": ids})
	})
	mux.HandleFunc("DELETE /sim/v1/flows", func(w http.ResponseWriter, r *http.Request) {
		f.RemoveFlows(nil)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /sim/v1/workloads/permutation", func(w http.ResponseWriter, r *http.Request) {
		req := struct {
			Seed uint64  `json:"seed"`
			Gbps float64 `json:"gbps"`
			QPs  int     `json:"qps"`
		}{Seed: 1, QPs: 1}
		if !readJSON(w, r, &req) {
			return
		}
		if req.Gbps <= 0 {
			writeError(w, fmt.Errorf("%w: gbps must be positive", models.ErrInvalid))
			return
		}
		specs, err := f.Permutation(req.Seed, req.Gbps, req.QPs)
		if err != nil {
			writeError(w, err)
			return
		}
		ids, err := f.AddFlows(specs)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, map[string]any{"ids": ids})
	})
	mux.HandleFunc("POST /sim/v1/links", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Link models.LinkID `json:"link"`
			Up   *bool         `json:"up"`
		}
		if !readJSON(w, r, &req) {
			return
		}
		if req.Up == nil {
			writeError(w, fmt.Errorf("%w: \"up\" is required", models.ErrInvalid))
			return
		}
		if err := f.SetLinkUp(req.Link, *req.Up); err != nil {
			writeError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "malformed JSON: " + err.Error()})
		return false
	}
	return true
}

func writeError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, models.ErrInvalid):
		code = http.StatusBadRequest
	case errors.Is(err, ErrUnknown):
		code = http.StatusNotFound
	}
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
