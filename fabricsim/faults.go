package fabricsim

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound/p4"
)

// Fault kinds.
const (
	FaultLinkDown   = "link-down"
	FaultLinkUp     = "link-up"
	FaultSwitchDown = "switch-down"
	FaultSwitchUp   = "switch-up"
	FaultDisconnect = "disconnect"  // drop the switch's gRPC streams; state is kept
	FaultWriteError = "write-error" // fail every Write with Code until cleared with code "OK"
	FaultSlowWrites = "slow-writes" // delay every Write by DelayMS (0 clears)
	FaultTableSize  = "table-size"  // give Table only Size entries (0 clears): further inserts fail RESOURCE_EXHAUSTED
	// FaultSwapCables swaps the far ends of two links (Target and With):
	// A–B and C–D become A–D and C–B, as a technician who plugged two
	// cables into each other's ports would leave them. Packets and
	// probes follow the cables; the declared topology does not change.
	// FaultRestoreCables puts every cable back.
	FaultSwapCables    = "swap-cables"
	FaultRestoreCables = "restore-cables"
)

// FaultSpec is a fault to inject.
type FaultSpec struct {
	Kind string `json:"kind"`
	// Target is a link ("leaf1:9<->spine1:1", either order) or a switch name.
	Target  string `json:"target"`
	Code    string `json:"code,omitempty"`     // write-error: a gRPC code name, e.g. UNAVAILABLE, RESOURCE_EXHAUSTED
	DelayMS int    `json:"delay_ms,omitempty"` // slow-writes
	Table   string `json:"table,omitempty"`    // table-size: a P4Info table name, e.g. Ingress.flow_pin
	Size    int    `json:"size,omitempty"`     // table-size
	With    string `json:"with,omitempty"`     // swap-cables: the second link
}

// FaultRecord is an injected fault and when.
type FaultRecord struct {
	FaultSpec
	At time.Time `json:"at"`
}

// ActiveFaults is the fabric's current fault state.
type ActiveFaults struct {
	LinksDown    []models.LinkID            `json:"links_down"`
	SwitchesDown []models.SwitchID          `json:"switches_down"`
	WriteErrors  map[models.SwitchID]string `json:"write_errors"`
	SlowWritesMS map[models.SwitchID]int64  `json:"slow_writes_ms"`
	Disabled     []string                   `json:"disabled_interfaces"` // switch:port set down over gNMI
	History      []FaultRecord              `json:"history"`
}

func parseLinkID(s string) (models.LinkID, error) {
	a, b, ok := strings.Cut(s, "<->")
	if !ok {
		return "", fmt.Errorf("%w: link %q: want \"switch:port<->switch:port\"", models.ErrInvalid, s)
	}
	ea, err := models.ParseEndpoint(a)
	if err != nil {
		return "", err
	}
	eb, err := models.ParseEndpoint(b)
	if err != nil {
		return "", err
	}
	return models.Link{A: ea, B: eb}.ID(), nil
}

func codeByName(name string) (codes.Code, error) {
	if name == "" {
		return codes.OK, nil
	}
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if strings.EqualFold(strings.ReplaceAll(c.String(), "_", ""), strings.ReplaceAll(name, "_", "")) {
			return c, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown gRPC code %q", models.ErrInvalid, name)
}

// InjectFault applies a fault.
func (f *Fabric) InjectFault(spec FaultSpec) error {
	switch spec.Kind {
	case FaultLinkDown, FaultLinkUp:
		id, err := parseLinkID(spec.Target)
		if err != nil {
			return err
		}
		if err := f.SetLinkUp(id, spec.Kind == FaultLinkUp); err != nil {
			return err
		}
	case FaultSwitchDown, FaultSwitchUp, FaultDisconnect, FaultWriteError, FaultSlowWrites, FaultTableSize:
		sw := f.switches[models.SwitchID(spec.Target)]
		if sw == nil {
			return fmt.Errorf("switch %q: %w", spec.Target, ErrUnknown)
		}
		switch spec.Kind {
		case FaultSwitchDown:
			f.setSwitchDown(sw)
		case FaultSwitchUp:
			f.setSwitchUp(sw)
		case FaultDisconnect:
			sw.dropStreams()
		case FaultWriteError:
			c, err := codeByName(spec.Code)
			if err != nil {
				return err
			}
			sw.faults.writeError.Store(int32(c))
		case FaultSlowWrites:
			if spec.DelayMS < 0 || spec.DelayMS > 60000 {
				return fmt.Errorf("%w: delay_ms must be 0-60000", models.ErrInvalid)
			}
			sw.SetWriteDelay(time.Duration(spec.DelayMS) * time.Millisecond)
		case FaultTableSize:
			schema, err := p4.LoadSchema()
			if err != nil {
				return err
			}
			if _, err := schema.Table(spec.Table); err != nil || spec.Size < 0 {
				return fmt.Errorf("%w: table-size needs a P4Info table name (got %q) and a size ≥ 0", models.ErrInvalid, spec.Table)
			}
			if spec.Size == 0 {
				sw.faults.tableLimits.Delete(spec.Table)
			} else {
				sw.faults.tableLimits.Store(spec.Table, spec.Size)
			}
		}
	case FaultSwapCables:
		if err := f.swapCables(spec.Target, spec.With); err != nil {
			return err
		}
	case FaultRestoreCables:
		f.mu.Lock()
		clear(f.cabled)
		f.markDirty("", true, true)
		f.mu.Unlock()
	default:
		return fmt.Errorf("%w: fault kind %q: want link-down, link-up, switch-down, switch-up, disconnect, write-error, slow-writes, table-size, swap-cables or restore-cables", models.ErrInvalid, spec.Kind)
	}
	f.faultMu.Lock() // not the dataplane's lock: the answer need not wait for a recomputation
	f.faultLog = append(f.faultLog, FaultRecord{FaultSpec: spec, At: time.Now()})
	if len(f.faultLog) > 1000 {
		f.faultLog = f.faultLog[len(f.faultLog)-1000:]
	}
	f.faultMu.Unlock()
	return nil
}

// setSwitchDown powers a switch off: its streams drop, its RPCs fail with
// UNAVAILABLE, its links go down.
func (f *Fabric) setSwitchDown(sw *Switch) {
	sw.down.Store(true)
	sw.dropStreams()
	f.markDirty(sw.name, true, false)
	// Every port cabled to it is down, whatever else holds: reported at
	// once, without the dataplane's lock, as a failed link is (see
	// SetLinkUp). Taken under the lock, at k=48 its neighbours reported
	// it only after the recomputation under way, up to 5 s later.
	f.publishOper(f.peerPorts(sw.name), func(models.Endpoint) bool { return false })
}

// peerPorts are the ports at the far end of a switch's links.
func (f *Fabric) peerPorts(name models.SwitchID) []models.Endpoint {
	var out []models.Endpoint
	for _, a := range f.snap.Neighbors(name) {
		out = append(out, models.Endpoint{Switch: a.Peer, Port: a.PeerPort})
	}
	return out
}

// setSwitchUp boots a switch: like a real reboot it comes back with no
// pipeline, empty tables and zeroed counters.
func (f *Fabric) setSwitchUp(sw *Switch) {
	sw.mu.Lock()
	sw.config, sw.store, sw.saved, sw.savedSchema = nil, nil, nil, nil
	sw.mu.Unlock()
	sw.tablesGen.Add(1)
	f.mu.Lock()
	for _, port := range f.snap.Ports(sw.name) {
		// Zeroed where they are: the dataplane's rates point at them.
		*f.counters[models.Endpoint{Switch: sw.name, Port: port}] = portCounters{}
	}
	delete(f.pinOctets, sw.name)
	f.mu.Unlock()
	sw.down.Store(false)
	f.markDirty(sw.name, true, false)
	f.publishOperStatus(f.peerPorts(sw.name)...)
}

// Faults reports the current fault state and recent injections.
func (f *Fabric) Faults() ActiveFaults {
	out := ActiveFaults{
		LinksDown: []models.LinkID{}, SwitchesDown: []models.SwitchID{}, Disabled: []string{},
		WriteErrors: map[models.SwitchID]string{}, SlowWritesMS: map[models.SwitchID]int64{},
	}
	for _, sw := range f.order {
		if sw.down.Load() {
			out.SwitchesDown = append(out.SwitchesDown, sw.name)
		}
		if c := codes.Code(sw.faults.writeError.Load()); c != codes.OK {
			out.WriteErrors[sw.name] = c.String()
		}
		if d := sw.faults.writeDelayNanos.Load(); d > 0 {
			out.SlowWritesMS[sw.name] = time.Duration(d).Milliseconds()
		}
	}
	for _, l := range f.snap.Links() {
		if f.faulted(l.ID()) {
			out.LinksDown = append(out.LinksDown, l.ID())
		}
	}
	f.mu.Lock()
	for e, down := range f.adminDown {
		if down {
			out.Disabled = append(out.Disabled, e.String())
		}
	}
	f.mu.Unlock()
	f.faultMu.Lock()
	out.History = append([]FaultRecord(nil), f.faultLog...)
	f.faultMu.Unlock()
	return out
}

// swapCables swaps the far ends of two declared links.
func (f *Fabric) swapCables(a, b string) error {
	var ends [2]models.Link
	for i, s := range []string{a, b} {
		id, err := parseLinkID(s)
		if err != nil {
			return err
		}
		l, err := f.snap.Link(id)
		if err != nil {
			return fmt.Errorf("link %s: %w", id, ErrUnknown)
		}
		ends[i] = l
	}
	if ends[0].ID() == ends[1].ID() {
		return fmt.Errorf("%w: swap-cables needs two different links", models.ErrInvalid)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	p, q := ends[0], ends[1]
	// A–B, C–D → A–D, C–B.
	f.cabled[p.A], f.cabled[q.B] = q.B, p.A
	f.cabled[q.A], f.cabled[p.B] = p.B, q.A
	f.markDirty("", true, true)
	return nil
}

// peerLocked is what a switch port is cabled to: the declared link's far
// end, unless swapped cables say otherwise; ok is false for a port with no
// link.
func (f *Fabric) peerLocked(e models.Endpoint) (peer models.Endpoint, l models.Link, ok bool) {
	l, ok = f.snap.LinkAt(e)
	if !ok {
		return models.Endpoint{}, l, false
	}
	if p, swapped := f.cabled[e]; swapped {
		return p, l, true
	}
	if l.A == e {
		return l.B, l, true
	}
	return l.A, l, true
}
