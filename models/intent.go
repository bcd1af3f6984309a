package models

import (
	"fmt"
	"iter"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
)

// FieldError is one problem with one field of a request.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// ValidationError lists every field problem found, not just the first, so a
// client can fix a request in one round trip. It matches ErrInvalid.
type ValidationError struct {
	Errors []FieldError
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Errors))
	for i, f := range e.Errors {
		parts[i] = f.Field + ": " + f.Message
	}
	return "models: invalid: " + strings.Join(parts, "; ")
}

// Is makes errors.Is(err, ErrInvalid) hold.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

func (e *ValidationError) add(field, format string, args ...any) {
	e.Errors = append(e.Errors, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (e *ValidationError) err() error {
	if len(e.Errors) == 0 {
		return nil
	}
	return e
}

// TenantName names a tenant; it is an etcd key segment.
type TenantName string

// Validate checks the name's shape.
func (n TenantName) Validate() error {
	if !nameRE.MatchString(string(n)) {
		return invalidf("tenant name %q: want 1-63 characters of letters, digits, '.', '_' or '-'", string(n))
	}
	return nil
}

// Tenant is an organisation allowed to reserve bandwidth, with its quotas.
type Tenant struct {
	Name TenantName `json:"name"`
	// MaxGbps caps the bandwidth the tenant's live intents reserve in total
	// (a collective counts every one of its flows); 0 means no cap.
	MaxGbps float64 `json:"max_gbps"`
	// MaxIntents caps how many live intents the tenant holds; 0 means no cap.
	MaxIntents int `json:"max_intents"`
	// MaxPriority is the highest priority its intents may ask for (0 to
	// 7; 0 by default): the operator grants priority, the tenant does not
	// choose it (under preemption a higher one displaces others' intents).
	MaxPriority int `json:"max_priority,omitempty"`
	// MaxPinsPerSwitch caps the entries its intents hold in any one
	// switch's flow-pin table; 0: the controller's default share of the
	// table (--tenant-pin-share, a quarter).
	MaxPinsPerSwitch int `json:"max_pins_per_switch,omitempty"`
	// Hosts are the hosts the tenant may reserve between, besides those
	// it holds: host names or patterns of them ("h2-*": path.Match
	// syntax). Empty: any host no other tenant holds.
	Hosts []string `json:"hosts,omitempty"`
	// Holds are hosts (names or patterns) the tenant holds exclusively:
	// it may use them and no other tenant may reserve to or from them.
	Holds   []string  `json:"holds,omitempty"`
	Created time.Time `json:"created,omitzero"`
}

// MaxTenantHosts bounds the host names and patterns one tenant lists.
const MaxTenantHosts = 1024

// matches says whether any of patterns names host.
func matches(patterns []string, host string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, host); ok {
			return true
		}
	}
	return false
}

// CheckHostPatterns says, for each of a tenant's host names or patterns
// (field: "hosts" or "holds") that names no host among hosts, why: an
// address where a name is wanted, a name in another case than the host's,
// or a name or pattern that matches nothing. A grant that matches nothing
// would be kept and do nothing.
func CheckHostPatterns(field string, patterns []string, hosts []Host) []FieldError {
	var out []FieldError
	for i, p := range patterns {
		if slices.ContainsFunc(hosts, func(h Host) bool { ok, _ := path.Match(p, h.Name); return ok }) {
			continue
		}
		at := fmt.Sprintf("%s[%d]", field, i)
		var msg string
		if ip, err := netip.ParseAddr(p); err == nil {
			msg = fmt.Sprintf("%q is an address: give the host's name", p)
			if j := slices.IndexFunc(hosts, func(h Host) bool { return h.IP == ip }); j >= 0 {
				msg = fmt.Sprintf("%q is an address: give the host's name (%s)", p, hosts[j].Name)
			}
		} else if j := slices.IndexFunc(hosts, func(h Host) bool { ok, _ := path.Match(strings.ToLower(p), strings.ToLower(h.Name)); return ok }); j >= 0 {
			msg = fmt.Sprintf("%q matches no host: host names are case-sensitive (%s)", p, hosts[j].Name)
		} else {
			msg = fmt.Sprintf("%q matches no host of the fabric", p)
		}
		out = append(out, FieldError{Field: at, Message: msg})
	}
	return out
}

// HoldsHost says whether the tenant holds host exclusively.
func (t Tenant) HoldsHost(host string) bool { return matches(t.Holds, host) }

// MayUse says whether tenant t may reserve to or from host, among the
// tenants all: it holds host, or no other tenant does and its grant
// allows it (every host if it lists none).
func MayUse(t Tenant, host string, all iter.Seq[Tenant]) bool {
	if t.HoldsHost(host) {
		return true
	}
	for o := range all {
		if o.Name != t.Name && o.HoldsHost(host) {
			return false
		}
	}
	return len(t.Hosts) == 0 || matches(t.Hosts, host)
}

// Validate checks a tenant.
func (t Tenant) Validate() error {
	var v ValidationError
	if err := t.Name.Validate(); err != nil {
		v.add("name", "want 1-63 characters of letters, digits, '.', '_' or '-'")
	}
	if t.MaxGbps < 0 || t.MaxGbps != t.MaxGbps {
		v.add("max_gbps", "must be zero (no cap) or positive")
	}
	if t.MaxIntents < 0 {
		v.add("max_intents", "must be zero (no cap) or positive")
	}
	if t.MaxPriority < 0 || t.MaxPriority > 7 {
		v.add("max_priority", "want 0-7")
	}
	if t.MaxPinsPerSwitch < 0 {
		v.add("max_pins_per_switch", "must be zero (the default share) or positive")
	}
	for _, list := range []struct {
		field    string
		patterns []string
	}{{"hosts", t.Hosts}, {"holds", t.Holds}} {
		if len(list.patterns) > MaxTenantHosts {
			v.add(list.field, "%d entries; at most %d (use patterns: \"h1-*\")", len(list.patterns), MaxTenantHosts)
			continue
		}
		for i, p := range list.patterns {
			if _, err := path.Match(p, ""); err != nil || p == "" || len(p) > MaxEndpointLen {
				v.add(fmt.Sprintf("%s[%d]", list.field, i), "want a host name or a pattern of them (\"h1-*\"), at most %d characters", MaxEndpointLen)
			}
		}
	}
	return v.err()
}

// Role is what a token may do.
type TokenRole string

const (
	RoleOperator TokenRole = "operator" // everything, every tenant
	RoleTenant   TokenRole = "tenant"   // its own tenant's intents only
)

// Token is a bearer credential as stored: its secret is kept only as a hash.
type Token struct {
	ID      string     `json:"id"`
	Tenant  TenantName `json:"tenant,omitempty"`
	Role    TokenRole  `json:"role"`
	Created time.Time  `json:"created,omitzero"`
}

// Validate checks a token's role and tenant.
func (t Token) Validate() error {
	var v ValidationError
	switch t.Role {
	case RoleOperator:
		if t.Tenant != "" {
			if err := t.Tenant.Validate(); err != nil {
				v.add("tenant", "%v", err)
			}
		}
	case RoleTenant:
		if err := t.Tenant.Validate(); err != nil {
			v.add("tenant", "a tenant token needs its tenant's name")
		}
	default:
		v.add("role", "want %q or %q", RoleTenant, RoleOperator)
	}
	return v.err()
}

// IntentState is where an intent is in its lifecycle.
type IntentState string

const (
	// Pending: stored, waiting for a path or capacity (or preempted).
	StatePending IntentState = "Pending"
	// Admitted: bandwidth reserved on every flow's path.
	StateAdmitted IntentState = "Admitted"
	// Installed: every switch on every path confirmed its entries by read-back.
	StateInstalled IntentState = "Installed"
	// Degraded: a path was lost and no capacity was left to move it; the
	// flows follow plain ECMP meanwhile.
	StateDegraded IntentState = "Degraded"
	// Failed: it was admitted or pending but cannot be served any more.
	StateFailed IntentState = "Failed"
	// Rejected: it never fitted (capacity or quota).
	StateRejected IntentState = "Rejected"
	// Deleted: the tenant deleted it; its entries are being removed.
	StateDeleted IntentState = "Deleted"
)

// Live reports whether an intent in this state holds (or waits for) a
// reservation and counts against its tenant's quota.
func (s IntentState) Live() bool {
	switch s {
	case StatePending, StateAdmitted, StateInstalled, StateDegraded:
		return true
	}
	return false
}

// ValidStates lists every state, for filters.
var ValidStates = []IntentState{StatePending, StateAdmitted, StateInstalled, StateDegraded, StateFailed, StateRejected, StateDeleted}

// TrafficClass selects the queue and drop behaviour of an intent's traffic.
type TrafficClass string

const (
	ClassLosslessRDMA TrafficClass = "lossless-rdma" // PFC-protected RoCEv2 (DSCP 26)
	ClassBestEffort   TrafficClass = "best-effort"
)

// The rates an intent may reserve, Gb/s: less than 1 Mb/s is no
// reservation (it would pin a flow for free: no quota counts it, no
// counter tells it from idle).
const (
	MinGbps = 0.001
	MaxGbps = 1e5
)

// PortRange is an inclusive range of UDP source ports. RoCEv2 NICs put each
// queue pair's entropy in the UDP source port, so a range names the QPs of
// a connection.
type PortRange struct {
	First uint16 `json:"first"`
	Last  uint16 `json:"last"`
}

// Len is the number of ports in the range.
func (r PortRange) Len() int { return int(r.Last) - int(r.First) + 1 }

// Constraints restrict the paths an intent may take.
type Constraints struct {
	// MaxHops bounds the number of switches on each path (0: no bound).
	MaxHops       int        `json:"max_hops,omitempty"`
	AvoidSwitches []SwitchID `json:"avoid_switches,omitempty"`
	AvoidLinks    []LinkID   `json:"avoid_links,omitempty"`
	// DisjointFrom names another intent of the same tenant (by ID) whose
	// inter-switch links this one must not share.
	DisjointFrom string `json:"disjoint_from,omitempty"`
}

// IsZero reports whether no constraint is set.
func (c Constraints) IsZero() bool {
	return c.MaxHops == 0 && len(c.AvoidSwitches) == 0 && len(c.AvoidLinks) == 0 && c.DisjointFrom == ""
}

// Collective patterns.
const (
	PatternRingAllReduce = "ring-allreduce"
	PatternAllToAll      = "all-to-all"
)

// Collective asks for every flow of a collective among GPU endpoints at
// once: a ring all-reduce sends GbpsPerGPU from each endpoint to the next,
// an all-to-all splits GbpsPerGPU evenly over every other endpoint.
type Collective struct {
	Pattern    string   `json:"pattern"`
	Endpoints  []string `json:"endpoints"`
	GbpsPerGPU float64  `json:"gbps_per_gpu"`
}

// MaxPortsPerIntent bounds an intent's source-port range: each port is one
// flow-pin entry on every switch of its path.
const MaxPortsPerIntent = 64

// Bounds on what one intent carries, so that no request stores much in
// etcd: every list and string has one (the OpenAPI document lists them).
const (
	// MaxAvoid bounds avoid_switches and avoid_links, each.
	MaxAvoid = 64
	// MaxEndpointLen bounds a host name or address (a DNS name's length).
	MaxEndpointLen = 253
	// MaxLinkIDLen bounds a link named in avoid_links.
	MaxLinkIDLen = 160
	// MaxIntentIDLen bounds an intent ID named in disjoint_from.
	MaxIntentIDLen = 64
)

// MaxCollectiveEndpoints bounds a collective's size (an all-to-all of n
// endpoints has n(n-1) flows).
const MaxCollectiveEndpoints = 64

// IntentSpec is what a tenant asks for.
type IntentSpec struct {
	Name string `json:"name"`
	// Src and Dst are host names or IPv4 addresses (unset for a collective).
	Src  string  `json:"src,omitempty"`
	Dst  string  `json:"dst,omitempty"`
	Gbps float64 `json:"gbps,omitempty"`
	// Class defaults to lossless RDMA.
	Class TrafficClass `json:"class,omitempty"`
	// SrcPorts identifies the flows: one flow per UDP source port, the
	// bandwidth split evenly between them.
	SrcPorts PortRange `json:"src_ports,omitzero"`
	// SampledFlows, instead of SrcPorts, reserves the bandwidth between
	// the hosts for whatever RoCEv2 flows they send: a job's NICs pick
	// their queue pairs' source ports, so it cannot name them. The
	// elephants sampling finds between the intent's host pairs are its
	// flows, pinned on its reserved paths.
	SampledFlows bool `json:"sampled_flows,omitempty"`
	// DstQPs would identify flows by RoCE destination queue pair; the
	// pipeline matches UDP headers only, so it is refused with a reason.
	DstQPs []uint32 `json:"dst_qps,omitempty"`
	// Priority 0 (lowest) to 7; a higher one may preempt lower ones when the
	// operator enables preemption.
	Priority    int         `json:"priority"`
	Constraints Constraints `json:"constraints,omitzero"`
	Collective  *Collective `json:"collective,omitempty"`
}

// WithDefaults is s with what it leaves out spelled out (the class:
// lossless RDMA), so two requests that differ only in saying a default
// are the same request.
func (s IntentSpec) WithDefaults() IntentSpec {
	if s.Class == "" {
		s.Class = ClassLosslessRDMA
	}
	return s
}

var intentNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9 ._:/-]{0,127}$`)

// Validate checks a spec on its own (not against a topology).
func (s IntentSpec) Validate() error {
	var v ValidationError
	if !intentNameRE.MatchString(s.Name) {
		v.add("name", "want 1-128 characters: letters, digits, space, '.', '_', ':', '/', '-'")
	}
	switch s.Class {
	case "", ClassLosslessRDMA, ClassBestEffort:
	default:
		v.add("class", "want %q or %q", ClassLosslessRDMA, ClassBestEffort)
	}
	s.validatePorts(&v)
	if s.Priority < 0 || s.Priority > 7 {
		v.add("priority", "want 0-7")
	}
	if !s.Constraints.validate(&v) {
		return v.err() // checking each would say nothing more
	}
	for _, f := range []struct{ field, value string }{{"src", s.Src}, {"dst", s.Dst}} {
		if len(f.value) > MaxEndpointLen {
			v.add(f.field, "over %d characters: not a host name or address", MaxEndpointLen)
		}
	}
	if s.Collective != nil {
		s.validateCollective(&v)
	} else {
		s.validatePair(&v)
	}
	return v.err()
}

// validatePorts checks how the spec's flows are told apart: source
// ports, or sampling.
func (s IntentSpec) validatePorts(v *ValidationError) {
	if s.SampledFlows {
		if s.SrcPorts != (PortRange{}) {
			v.add("src_ports", "give src_ports or sampled_flows, not both")
		}
	} else if s.SrcPorts.First == 0 && s.SrcPorts.Last == 0 {
		v.add("src_ports", "required unless sampled_flows is set: accelnet pins flows by UDP source port (e.g. {\"first\":49152,\"last\":49155} for 4 QPs), or with sampled_flows the flows sampling finds between the hosts")
	} else if s.SrcPorts.First == 0 {
		v.add("src_ports.first", "port 0 is no UDP source port: want 1-65535")
	} else if s.SrcPorts.Last < s.SrcPorts.First {
		v.add("src_ports", "last (%d) is below first (%d)", s.SrcPorts.Last, s.SrcPorts.First)
	} else if s.SrcPorts.Len() > MaxPortsPerIntent {
		v.add("src_ports", "%d ports; at most %d per intent (each is a flow-pin entry on every switch of its path)", s.SrcPorts.Len(), MaxPortsPerIntent)
	}
	if len(s.DstQPs) > 0 {
		v.add("dst_qps", "not supported: the pipeline matches UDP source ports, not the RoCE header; use src_ports")
	}
}

// validate checks the constraints; false when there are too many to
// check each.
func (c Constraints) validate(v *ValidationError) bool {
	if c.MaxHops < 0 {
		v.add("constraints.max_hops", "must be zero (no bound) or positive")
	}
	if n := len(c.AvoidSwitches); n > MaxAvoid {
		v.add("constraints.avoid_switches", "%d switches; at most %d", n, MaxAvoid)
		return false
	}
	if n := len(c.AvoidLinks); n > MaxAvoid {
		v.add("constraints.avoid_links", "%d links; at most %d", n, MaxAvoid)
		return false
	}
	if len(c.DisjointFrom) > MaxIntentIDLen {
		v.add("constraints.disjoint_from", "not an intent ID: over %d characters", MaxIntentIDLen)
	}
	for i, sw := range c.AvoidSwitches {
		if sw.Validate() != nil {
			v.add(fmt.Sprintf("constraints.avoid_switches[%d]", i), "not a switch name: %q", string(sw))
		}
	}
	for i, l := range c.AvoidLinks {
		if len(l) > MaxLinkIDLen {
			v.add(fmt.Sprintf("constraints.avoid_links[%d]", i), "over %d characters: not a link", MaxLinkIDLen)
		} else if _, _, err := l.Ends(); err != nil {
			v.add(fmt.Sprintf("constraints.avoid_links[%d]", i), "%v", err)
		}
	}
	return true
}

// validateCollective checks a collective's pattern, endpoints and rate.
func (s IntentSpec) validateCollective(v *ValidationError) {
	c := s.Collective
	if s.Src != "" || s.Dst != "" || s.Gbps != 0 {
		v.add("collective", "a collective gives endpoints and gbps_per_gpu, not src, dst or gbps")
	}
	if c.Pattern != PatternRingAllReduce && c.Pattern != PatternAllToAll {
		v.add("collective.pattern", "want %q or %q", PatternRingAllReduce, PatternAllToAll)
	}
	if len(c.Endpoints) < 2 || len(c.Endpoints) > MaxCollectiveEndpoints {
		v.add("collective.endpoints", "want 2-%d endpoints, got %d", MaxCollectiveEndpoints, len(c.Endpoints))
		return
	}
	seen := map[string]bool{}
	for i, e := range c.Endpoints {
		if e == "" {
			v.add(fmt.Sprintf("collective.endpoints[%d]", i), "empty")
		} else if len(e) > MaxEndpointLen {
			v.add(fmt.Sprintf("collective.endpoints[%d]", i), "over %d characters: not a host name or address", MaxEndpointLen)
		} else if seen[e] {
			v.add(fmt.Sprintf("collective.endpoints[%d]", i), "%q appears twice", e)
		}
		seen[e] = true
	}
	if !(c.GbpsPerGPU >= MinGbps) || c.GbpsPerGPU > MaxGbps {
		v.add("collective.gbps_per_gpu", "want a rate from %g (1 Mb/s) to %g", MinGbps, MaxGbps)
	}
}

// validatePair checks a pair's endpoints and rate.
func (s IntentSpec) validatePair(v *ValidationError) {
	if s.Src == "" {
		v.add("src", "required (a host name or IP)")
	}
	if s.Dst == "" {
		v.add("dst", "required (a host name or IP)")
	}
	if s.Src != "" && s.Src == s.Dst {
		v.add("dst", "same as src")
	}
	if !(s.Gbps >= MinGbps) || s.Gbps > MaxGbps {
		v.add("gbps", "want a rate from %g (1 Mb/s) to %g", MinGbps, MaxGbps)
	}
}

// FlowStatus is one flow of an intent and where it goes.
type FlowStatus struct {
	Src     string  `json:"src"`
	Dst     string  `json:"dst"`
	SrcPort uint16  `json:"src_port"`
	Gbps    float64 `json:"gbps"`
	// Path is the egress ports the flow leaves through, source leaf first;
	// empty while the flow is not pinned (Pending, Degraded).
	Path []Endpoint `json:"path,omitempty"`
}

// IntentEvent is one lifecycle step.
type IntentEvent struct {
	Time   time.Time   `json:"time"`
	State  IntentState `json:"state"`
	Reason string      `json:"reason"`
}

// MaxIntentEvents is how many recent events an intent keeps.
const MaxIntentEvents = 16

// IntentStatus is what the controller says about an intent.
type IntentStatus struct {
	State  IntentState  `json:"state"`
	Reason string       `json:"reason"`
	Flows  []FlowStatus `json:"flows,omitempty"`
	// ReservedGbps is bandwidth reserved per link direction ("sw:port>").
	ReservedGbps map[string]float64 `json:"reserved_gbps,omitempty"`
	// ObservedGbps is what the flows carry now, from the direct counters
	// of their first-hop flow-pin entries (telemetry: not stored).
	ObservedGbps float64 `json:"observed_gbps"`
	// Latency is the flows' path latency (telemetry: not stored; shown
	// with one intent, not in lists).
	Latency *PathLatency `json:"latency,omitempty"`
	// QPHint, when set, says that more QPs per connection (source ports)
	// would lower the max reserved utilization, and how many: told at
	// admission when its links are tight, and with a refusal.
	QPHint  *QPHint       `json:"qp_hint,omitempty"`
	Events  []IntentEvent `json:"events,omitempty"`
	Updated time.Time     `json:"updated,omitzero"`
}

// PathLatency is a one-way latency over paths, microseconds: now (the
// mean over the paths), and the median and 99th percentile over the
// paths and a window of sampling intervals. Source says what it is
// assembled from (see api.LatencySource).
type PathLatency struct {
	Source string  `json:"source"`
	NowUs  float64 `json:"now_us"`
	P50Us  float64 `json:"p50_us"`
	P99Us  float64 `json:"p99_us"`
}

// QPHint says how many queue pairs (UDP source ports) per connection a
// set of connections needs to come closest to the fabric's best: with
// too few, a connection is one flow on one path, and after a failure
// (31 working uplinks for 32 connections) whole flows cannot spread
// evenly; split over more QPs they can. pathcalc.Book.QPHint computes it.
type QPHint struct {
	// Declared is the QPs per connection asked for; DeclaredFits says
	// whether the connections fit with them, and DeclaredMLU the highest
	// reserved utilization their placement reaches (over what is
	// reserved already).
	Declared     int     `json:"declared"`
	DeclaredFits bool    `json:"declared_fits"`
	DeclaredMLU  float64 `json:"declared_mlu"`
	// QPs per connection reach MLU, the lowest of any tried (within 1%);
	// Fits says whether they fit at all.
	QPs  int     `json:"qps"`
	Fits bool    `json:"fits"`
	MLU  float64 `json:"mlu"`
}

// Better says whether more QPs would make the connections fit, or lower
// the utilization noticeably.
func (h QPHint) Better() bool {
	if h.QPs <= h.Declared || !h.Fits {
		return false
	}
	return !h.DeclaredFits || h.MLU < h.DeclaredMLU-0.02
}

func (h QPHint) String() string {
	switch {
	case !h.Better() && h.DeclaredFits:
		return fmt.Sprintf("%d QPs per connection reach max reserved utilization %.2f; more would not help", h.Declared, h.DeclaredMLU)
	case !h.Better():
		return fmt.Sprintf("splitting connections over up to %d QPs would not make them fit", max(h.QPs, h.Declared))
	case !h.DeclaredFits:
		return fmt.Sprintf("with %d QPs per connection (source ports) it would fit, max reserved utilization %.2f", h.QPs, h.MLU)
	}
	return fmt.Sprintf("%d QPs per connection (source ports) reach max reserved utilization %.2f where the %d declared reach %.2f", h.QPs, h.MLU, h.Declared, h.DeclaredMLU)
}

// Intent is a tenant's request with its status, as stored in etcd.
type Intent struct {
	ID     string     `json:"id"`
	Tenant TenantName `json:"tenant"`
	// Revision is the etcd mod revision it was read at (an ETag).
	Revision int64        `json:"revision"`
	Created  time.Time    `json:"created,omitzero"`
	Spec     IntentSpec   `json:"spec"`
	Status   IntentStatus `json:"status"`
}

// SetState moves the intent to state with a reason, recording the event
// and trimming old ones.
func (in *Intent) SetState(state IntentState, reason string, now time.Time) {
	in.Status.State, in.Status.Reason, in.Status.Updated = state, reason, now
	in.Status.Events = append(in.Status.Events, IntentEvent{Time: now, State: state, Reason: reason})
	if n := len(in.Status.Events); n > MaxIntentEvents {
		in.Status.Events = append([]IntentEvent(nil), in.Status.Events[n-MaxIntentEvents:]...)
	}
}

// TotalGbps is the bandwidth the intent reserves over all its flows.
func (s IntentSpec) TotalGbps() float64 {
	if c := s.Collective; c != nil {
		return c.GbpsPerGPU * float64(len(c.Endpoints))
	}
	return s.Gbps
}

// Drain takes a switch or a link out of service for maintenance: traffic
// and intents move off it; removing the drain lets them back.
type Drain struct {
	ID     string   `json:"id"`
	Switch SwitchID `json:"switch,omitempty"`
	Link   LinkID   `json:"link,omitempty"`
	Reason string   `json:"reason,omitempty"`
	// Force allows a drain that cuts hosts off the fabric (a leaf's
	// hosts have no other way in).
	Force   bool      `json:"force,omitempty"`
	Created time.Time `json:"created,omitzero"`
}

// Validate checks that exactly one of switch and link is named.
func (d Drain) Validate() error {
	var v ValidationError
	switch {
	case d.Switch == "" && d.Link == "":
		v.add("switch", "name a switch or a link to drain")
	case d.Switch != "" && d.Link != "":
		v.add("link", "name a switch or a link, not both")
	case d.Switch != "":
		if d.Switch.Validate() != nil {
			v.add("switch", "not a switch name: %q", string(d.Switch))
		}
	case len(d.Link) > MaxLinkIDLen:
		v.add("link", "over %d characters: not a link", MaxLinkIDLen)
	default:
		if _, _, err := d.Link.Ends(); err != nil {
			v.add("link", "%v", err)
		}
	}
	if len(d.Reason) > 256 {
		v.add("reason", "at most 256 characters")
	}
	return v.err()
}
