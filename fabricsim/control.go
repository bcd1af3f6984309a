package fabricsim

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/accelnet/accelnet/internal/strictjson"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound/p4"
)

// ErrUnknown is returned for flows, hosts or links the fabric does not have.
var ErrUnknown = errors.New("unknown")

// AddFlows offers flows to the dataplane and returns their IDs. Every flow
// is checked first; on any error none is added.
func (f *Fabric) AddFlows(specs []FlowSpec) ([]uint64, error) { return f.addFlows(specs, "") }

func (f *Fabric) addFlows(specs []FlowSpec, workload string) ([]uint64, error) {
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
		if !(s.DemandGbps > 0) || s.DemandGbps > 1e6 {
			return nil, fmt.Errorf("%w: flow %d: demand_gbps must be in (0, 1e6]", models.ErrInvalid, i)
		}
		if s.DestQP >= 1<<24 {
			return nil, fmt.Errorf("%w: flow %d: dest_qp is a 24-bit number", models.ErrInvalid, i)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := make([]uint64, len(specs))
	for i, s := range specs {
		f.nextFlow++
		ids[i] = f.nextFlow
		f.flows[f.nextFlow] = &flowState{FlowStatus: FlowStatus{ID: f.nextFlow, Spec: s, Workload: workload}}
	}
	f.markDirty("", false, true)
	return ids, nil
}

// RemoveFlows stops flows by ID; nil stops every flow (and workload).
func (f *Fabric) RemoveFlows(ids []uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ids == nil {
		clear(f.flows)
		clear(f.workloads)
	}
	for _, id := range ids {
		delete(f.flows, id)
	}
	f.markDirty("", false, true)
}

// Flows returns every flow's current path and rate, by ID. Changes since the
// last counter interval are applied first.
func (f *Fabric) Flows() []FlowStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recomputeLocked()
	out := make([]FlowStatus, 0, len(f.flows))
	for _, fl := range f.flows {
		st := fl.FlowStatus
		st.Hops = slices.Clone(st.Hops)
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b FlowStatus) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Trace answers how the fabric forwards a flow right now: its hops, where
// and why it would drop, and, if such a flow is running, its rate.
func (f *Fabric) Trace(spec FlowSpec) FlowStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recomputeLocked()
	st := FlowStatus{Spec: spec}
	st.Hops, st.Drop, st.DropAt, _ = f.traceLocked(spec)
	st.Delivered = st.Drop == ""
	for _, fl := range f.flows {
		if fl.Spec.Key() == spec.Key() {
			st.ID, st.RateGbps, st.Workload = fl.ID, fl.RateGbps, fl.Workload
			st.Spec.DemandGbps = fl.Spec.DemandGbps
			break
		}
	}
	return st
}

// SetLinkUp takes a link down or brings it back (an injected fault: both
// ends' oper-status follow). A link goes down without waiting for the
// dataplane's lock (see Fabric.linkFault): both ends report it at once.
func (f *Fabric) SetLinkUp(id models.LinkID, up bool) error {
	l, err := f.snap.Link(id)
	if err != nil {
		return fmt.Errorf("link %s: %w", id, ErrUnknown)
	}
	f.faultMu.Lock()
	faults := maps.Clone(*f.linkFault.Load())
	if up {
		delete(faults, id)
	} else {
		faults[id] = true
	}
	f.linkFault.Store(&faults)
	f.faultMu.Unlock()
	f.markDirty("", true, false)
	if up {
		f.publishOperStatus(l.A, l.B) // up only if nothing else holds it down
		return nil
	}
	f.publishOper([]models.Endpoint{l.A, l.B}, func(models.Endpoint) bool { return false })
	return nil
}

// faulted says whether an injected fault holds link id down.
func (f *Fabric) faulted(id models.LinkID) bool { return (*f.linkFault.Load())[id] }

// publishOperStatus sends the oper-status of ports at once, as a switch
// reports a link change when it happens rather than at its next counter
// sample (gNMI ON_CHANGE subscribers see it immediately).
func (f *Fabric) publishOperStatus(ends ...models.Endpoint) {
	up := map[models.Endpoint]bool{}
	f.mu.Lock()
	for _, e := range ends {
		if f.switches[e.Switch] != nil {
			up[e] = f.operUpLocked(e)
		}
	}
	f.mu.Unlock()
	f.publishOper(ends, func(e models.Endpoint) bool { return up[e] })
}

// publishOper sends ends' oper-status, as up says, from the switches
// that are up (one that is down publishes nothing).
func (f *Fabric) publishOper(ends []models.Endpoint, up func(models.Endpoint) bool) {
	ts := time.Now().UnixNano()
	for _, e := range ends {
		if sw := f.switches[e.Switch]; sw != nil && !sw.down.Load() {
			if err := sw.gnmi.publishOper(ts, e.Port, up(e)); err != nil {
				f.log.Warn("publish oper-status", "switch", sw.name, "err", err)
			}
		}
	}
}

// resolveHost accepts a host name or IP.
func (f *Fabric) resolveHost(s string) (models.Host, error) {
	if ip, err := netip.ParseAddr(s); err == nil {
		return f.snap.HostByIP(ip)
	}
	return f.snap.Host(s)
}

// Handler is the control API, to mount under /sim/v1/:
//
//	GET    /sim/v1/switches            switches, addresses, entry counts, writes, per-port counters
//	GET    /sim/v1/flows               every flow's path, drop reason and rate
//	POST   /sim/v1/flows               {"flows":[FlowSpec...]} → {"ids":[...]}
//	DELETE /sim/v1/flows               stop every flow and workload
//	POST   /sim/v1/workloads           WorkloadSpec → {"id": "w1"}
//	GET    /sim/v1/workloads           running workloads' IDs
//	GET    /sim/v1/workloads/{id}      WorkloadFigures
//	DELETE /sim/v1/workloads/{id}      stop it
//	POST   /sim/v1/workloads/permutation {"seed":1,"gbps":400,"qps":1} (shorthand)
//	POST   /sim/v1/faults              FaultSpec
//	GET    /sim/v1/faults              ActiveFaults
//	POST   /sim/v1/links               {"link":"leaf1:9<->spine1:1","up":false}
//	GET    /sim/v1/trace?src=HOST&dst=HOST[&sport=N]   hops and rate of that flow now
//	GET    /sim/v1/stats               dataplane recompute figures
//	GET    /sim/v1/writes?since=UNIXNANO  table writes: last, first since, count
func (f *Fabric) Handler() http.Handler {
	mux := http.NewServeMux()
	c := control{f}
	mux.HandleFunc("GET /sim/v1/switches", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"switches": f.SwitchReports()})
	})
	mux.HandleFunc("GET /sim/v1/flows", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"flows": f.Flows()})
	})
	mux.HandleFunc("POST /sim/v1/flows", c.addFlows)
	mux.HandleFunc("DELETE /sim/v1/flows", func(w http.ResponseWriter, r *http.Request) {
		f.RemoveFlows(nil)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /sim/v1/workloads", c.startWorkload)
	mux.HandleFunc("GET /sim/v1/workloads", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"workloads": f.Workloads()})
	})
	mux.HandleFunc("GET /sim/v1/workloads/{id}", c.workloadFigures)
	mux.HandleFunc("DELETE /sim/v1/workloads/{id}", c.stopWorkload)
	mux.HandleFunc("POST /sim/v1/workloads/permutation", c.startPermutation)
	mux.HandleFunc("POST /sim/v1/faults", c.injectFault)
	mux.HandleFunc("GET /sim/v1/faults", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, f.Faults())
	})
	mux.HandleFunc("POST /sim/v1/links", c.setLink)
	mux.HandleFunc("GET /sim/v1/trace", c.trace)
	mux.HandleFunc("GET /sim/v1/stats", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, f.Stats())
	})
	mux.HandleFunc("GET /sim/v1/writes", c.writes)
	return mux
}

// control serves the emulator's control API's requests that take a body
// or a query.
type control struct{ f *Fabric }

func (c control) addFlows(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Flows []FlowSpec `json:"flows"`
	}
	if !readJSON(w, r, &req) {
		return
	}
	ids, err := c.f.AddFlows(req.Flows)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"ids": ids})
}

func (c control) startWorkload(w http.ResponseWriter, r *http.Request) {
	var spec WorkloadSpec
	if readJSON(w, r, &spec) {
		c.start(w, spec)
	}
}

// start starts a workload and answers with its ID.
func (c control) start(w http.ResponseWriter, spec WorkloadSpec) {
	id, err := c.f.StartWorkload(spec)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"id": id})
}

func (c control) workloadFigures(w http.ResponseWriter, r *http.Request) {
	wf, err := c.f.WorkloadFigures(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, wf)
}

func (c control) stopWorkload(w http.ResponseWriter, r *http.Request) {
	if err := c.f.StopWorkload(r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (c control) startPermutation(w http.ResponseWriter, r *http.Request) {
	req := struct {
		Seed uint64  `json:"seed"`
		Gbps float64 `json:"gbps"`
		QPs  int     `json:"qps"`
	}{Seed: 1, QPs: 1}
	if readJSON(w, r, &req) {
		c.start(w, WorkloadSpec{Pattern: PatternPermutation, Gbps: req.Gbps, QPsPerConnection: req.QPs, Seed: req.Seed})
	}
}

func (c control) injectFault(w http.ResponseWriter, r *http.Request) {
	var spec FaultSpec
	if !readJSON(w, r, &spec) {
		return
	}
	if err := c.f.InjectFault(spec); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c.f.Faults())
}

func (c control) setLink(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Link string `json:"link"`
		Up   *bool  `json:"up"`
	}
	if !readJSON(w, r, &req) {
		return
	}
	if req.Up == nil {
		writeError(w, fmt.Errorf("%w: \"up\" is required", models.ErrInvalid))
		return
	}
	kind := FaultLinkDown
	if *req.Up {
		kind = FaultLinkUp
	}
	if err := c.f.InjectFault(FaultSpec{Kind: kind, Target: req.Link}); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (c control) trace(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	src, err := c.f.resolveHost(q.Get("src"))
	if err != nil {
		writeError(w, fmt.Errorf("src %q: %w", q.Get("src"), ErrUnknown))
		return
	}
	dst, err := c.f.resolveHost(q.Get("dst"))
	if err != nil {
		writeError(w, fmt.Errorf("dst %q: %w", q.Get("dst"), ErrUnknown))
		return
	}
	sport := uint64(49152)
	if s := q.Get("sport"); s != "" {
		if sport, err = strconv.ParseUint(s, 10, 16); err != nil {
			writeError(w, fmt.Errorf("%w: sport %q is not a UDP port", models.ErrInvalid, s))
			return
		}
	}
	writeJSON(w, http.StatusOK, c.f.Trace(FlowSpec{Src: src.IP, Dst: dst.IP, SrcPort: uint16(sport)}))
}

func (c control) writes(w http.ResponseWriter, r *http.Request) {
	var since int64
	if v := r.URL.Query().Get("since"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			writeError(w, fmt.Errorf("%w: since=%q: want Unix nanoseconds", models.ErrInvalid, v))
			return
		}
		since = n
	}
	writeJSON(w, http.StatusOK, c.f.Writes(time.Unix(0, since)))
}

// WriteTimes are when the fabric's tables were written (Unix nanoseconds,
// 0 for none): the last write to any switch, the first at or after a
// moment, and the Write RPCs that changed tables in all.
type WriteTimes struct {
	Last       int64 `json:"last"`
	FirstSince int64 `json:"first_since"`
	Writes     int64 `json:"writes"`
}

// Writes reports the fabric's table writes (for timing a controller from
// outside its process).
func (f *Fabric) Writes(since time.Time) WriteTimes {
	var out WriteTimes
	for _, sw := range f.order {
		if l := sw.lastWrite.Load(); l > out.Last {
			out.Last = l
		}
		if t := sw.FirstWriteSince(since); !t.IsZero() && (out.FirstSince == 0 || t.UnixNano() < out.FirstSince) {
			out.FirstSince = t.UnixNano()
		}
		n, _ := sw.WriteStats()
		out.Writes += n
	}
	return out
}

// Stats are dataplane figures, and whether the switches serve yet.
type Stats struct {
	// Up: every switch has published its initial state and serves
	// P4Runtime and gNMI (a k=48 fat-tree takes seconds after the
	// control API answers).
	Up                bool    `json:"up"`
	Flows             int     `json:"flows"`
	Recomputes        int     `json:"recomputes"`
	LastRecomputeMS   float64 `json:"last_recompute_ms"`
	LastRetracedFlows int     `json:"last_retraced_flows"`
}

// Stats reports how much work the dataplane does.
func (f *Fabric) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	up := false
	select {
	case <-f.ready:
		up = true
	default:
	}
	return Stats{Up: up, Flows: len(f.flows), Recomputes: f.stats.recomputes,
		LastRecomputeMS: float64(f.stats.lastRecompute.Microseconds()) / 1000, LastRetracedFlows: f.stats.lastRetraced}
}

// PortReport is one port's counters as the control API shows them.
type PortReport struct {
	Port             uint32             `json:"port"`
	OperUp           bool               `json:"oper_up"`
	InOctets         uint64             `json:"in_octets"`
	OutOctets        uint64             `json:"out_octets"`
	ECNMarkedOctets  uint64             `json:"ecn_marked_octets"`
	InDiscardOctets  uint64             `json:"in_discard_octets"`
	OutDiscardOctets uint64             `json:"out_discard_octets"`
	DropsByReason    map[string]uint64  `json:"drops_by_reason,omitempty"`
	RateBps          map[string]float64 `json:"rate_bps"`
	// QueueBytes is the egress queue's depth (the model in queues.go).
	QueueBytes float64 `json:"queue_bytes"`
}

// SwitchReport is one switch as the control API shows it.
type SwitchReport struct {
	Name     models.SwitchID `json:"name"`
	DeviceID uint64          `json:"device_id"`
	Addr     string          `json:"addr"`
	Down     bool            `json:"down"`
	Routes   int             `json:"routes"`
	FlowPins int             `json:"flow_pins"`
	Writes   int64           `json:"write_rpcs"`
	Updates  int64           `json:"write_updates"`
	Ports    []PortReport    `json:"ports"`
}

// SwitchReports describes every switch and its ports.
func (f *Fabric) SwitchReports() []SwitchReport {
	var out []SwitchReport
	for _, s := range f.order {
		rpcs, ups := s.WriteStats()
		out = append(out, SwitchReport{Name: s.name, DeviceID: s.deviceID, Addr: s.Addr(), Down: s.down.Load(),
			Routes: s.Entries(p4.TableIPv4LPM), FlowPins: s.Entries(p4.TableFlowPin), Writes: rpcs, Updates: ups})
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.advanceLocked(time.Now())
	for i := range out {
		for _, port := range f.snap.Ports(out[i].Name) {
			e := models.Endpoint{Switch: out[i].Name, Port: port}
			c := f.counters[e]
			pr := PortReport{Port: port, OperUp: f.operUpLocked(e), InOctets: uint64(c.inOctets), OutOctets: uint64(c.outOctets),
				ECNMarkedOctets: uint64(c.ecnOctets), InDiscardOctets: uint64(c.inDiscardOctets), OutDiscardOctets: uint64(c.outDiscardOctets),
				QueueBytes: c.queueBytes}
			if len(c.drops) > 0 {
				pr.DropsByReason = map[string]uint64{}
				for k, v := range c.drops {
					pr.DropsByReason[k] = uint64(v)
				}
			}
			if r := f.portRate[e]; r != nil {
				pr.RateBps = map[string]float64{"in": r.inBps, "out": r.outBps, "ecn": r.ecnBps}
			}
			out[i].Ports = append(out[i].Ports, pr)
		}
	}
	return out
}

// maxBody bounds a control request's body, and bodyLimits what it may
// hold: a flow list of tens of thousands, nested no deeper than the
// request types.
const maxBody = 8 << 20

var bodyLimits = strictjson.Limits{MaxDepth: 16, MaxValues: 1_000_000}

// readJSON decodes a request's body strictly (strictjson: keys in their
// field's case, none twice, no unknown fields, bounded depth and size).
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		code, msg := http.StatusBadRequest, "the body could not be read: "+err.Error()
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			code, msg = http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", maxBody)
		}
		writeJSON(w, code, map[string]string{"error": msg})
		return false
	}
	if err := bodyLimits.Decode(body, v); err != nil {
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

// OnWrite registers fn to be called after every Write that changed a
// switch's tables (outside the fabric's locks), so a test can inspect each
// intermediate state of an update.
func (f *Fabric) OnWrite(fn func(models.SwitchID)) {
	f.onWrite.Store(&fn)
}

// Audit is how a set of flows would be forwarded right now.
type Audit struct {
	Flows     int `json:"flows"`
	Delivered int `json:"delivered"`
	// Loops are flows that would circle until their TTL ran out; NoRoute
	// flows that a switch has no entry for; LinkDown flows sent into a
	// link that is down.
	Loops    int      `json:"loops"`
	NoRoute  int      `json:"no_route"`
	LinkDown int      `json:"link_down"`
	Examples []string `json:"examples,omitempty"`
}

// AuditFlows traces specs through the tables as they are at this instant.
func (f *Fabric) AuditFlows(specs []FlowSpec) Audit {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recomputeLocked()
	a := Audit{Flows: len(specs)}
	for _, s := range specs {
		_, drop, detail, _ := f.traceLocked(s)
		switch drop {
		case "":
			a.Delivered++
			continue
		case DropTTL:
			a.Loops++
		case DropNoRoute:
			a.NoRoute++
		case DropLinkDown:
			a.LinkDown++
		}
		if len(a.Examples) < 5 {
			a.Examples = append(a.Examples, fmt.Sprintf("%s:%d->%s %s (%s)", s.Src, s.SrcPort, s.Dst, drop, detail))
		}
	}
	return a
}
