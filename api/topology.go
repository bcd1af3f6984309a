package api

import (
	"time"

	"github.com/accelnet/accelnet/models"
)

// SwitchStatus is the outcome of a switch's last reconcile.
type SwitchStatus struct {
	InSync        bool      `json:"in_sync"`
	Entries       int       `json:"entries"`
	LastWrites    int       `json:"last_writes"`
	LastReconcile time.Time `json:"last_reconcile,omitzero"`
	LastError     string    `json:"last_error,omitempty"`
	// ConfigInSync says the ports' interface configuration was last read
	// back as the fabric profile wants; ConfigError why not.
	ConfigInSync bool   `json:"config_in_sync"`
	ConfigError  string `json:"config_error,omitempty"`
	Revision     int64  `json:"topology_revision"`
}

// LinkLoad is a link's measured load in both directions.
type LinkLoad struct {
	ABbps float64 `json:"a_to_b_bps"`
	BAbps float64 `json:"b_to_a_bps"`
	// Drops are what each end's egress discards (gNMI out-discards), in
	// bit/s of the dropped packets.
	ABDropBps float64 `json:"a_to_b_drop_bps"`
	BADropBps float64 `json:"b_to_a_drop_bps"`
	// ECN is the traffic each end's egress marked Congestion Experienced
	// (OpenConfig QoS queue ecn-marked-octets), bit/s: congestion before
	// anything is dropped.
	ABECNBps    float64 `json:"a_to_b_ecn_bps"`
	BAECNBps    float64 `json:"b_to_a_ecn_bps"`
	Utilization float64 `json:"utilization"` // busier direction over capacity
	Up          bool    `json:"up"`
	Measured    bool    `json:"measured"` // both ends reported
	Stale       bool    `json:"stale"`
}

// DiscoveryState is what link discovery says of a declared link.
type DiscoveryState string

// EntriesView is a switch's programmed state as read back.
type EntriesView struct {
	Switch  models.SwitchID        `json:"switch"`
	Entries models.ForwardingState `json:"entries"`
	Counts  map[string]int         `json:"counts"`
}

// LinkDiscovery is a declared link's discovery state; Seen lists, for a
// miswired link, what its ends heard instead of each other.
type LinkDiscovery struct {
	State DiscoveryState `json:"state"`
	Seen  []string       `json:"seen,omitempty"` // "leaf1:9 hears spine2:3"
}

// Discovery states.
const (
	DiscoveryPending   DiscoveryState = "pending"   // not probed long enough to say
	DiscoveryConfirmed DiscoveryState = "confirmed" // both ends heard each other
	DiscoveryMiswired  DiscoveryState = "miswired"  // an end hears another port
	DiscoveryMissing   DiscoveryState = "missing"   // up, but never heard
	DiscoveryLost      DiscoveryState = "lost"      // confirmed once, not heard lately: routed around
	DiscoveryDown      DiscoveryState = "down"      // reported down: not probed
)

// Topology response types.
type (
	TopologyView struct {
		Name     string       `json:"name,omitempty"`
		Revision int64        `json:"revision"`
		Switches []SwitchView `json:"switches"`
		Links    []LinkView   `json:"links"`
		Hosts    []HostView   `json:"hosts"`
		// UndeclaredLinks are links discovery hears where the topology
		// declares none ("leaf1:9 <-> spine3:1").
		UndeclaredLinks []string `json:"undeclared_links,omitempty"`
	}
	SwitchView struct {
		models.Switch
		Status  *SwitchStatus `json:"status,omitempty"`
		Drained bool          `json:"drained,omitempty"`
	}
	LinkView struct {
		ID   models.LinkID   `json:"id"`
		A    models.Endpoint `json:"a"`
		B    models.Endpoint `json:"b"`
		Gbps float64         `json:"gbps"`
		Load LinkLoad        `json:"load"`
		// Drained: an operator took it out of service; Dampened: it
		// flapped and is kept out of routes until it settles.
		Drained  bool `json:"drained,omitempty"`
		Dampened bool `json:"dampened,omitempty"`
		// Discovery is what link discovery's probes say of it (absent
		// until probes run): a miswired link carries no routes.
		Discovery *LinkDiscovery `json:"discovery,omitempty"`
	}
	HostView struct {
		models.Host
		TxBps float64 `json:"tx_bps"` // into the fabric (leaf port in)
		RxBps float64 `json:"rx_bps"` // out of the fabric (leaf port out)
		// PortDown: the leaf port it attaches to was last reported down.
		PortDown bool `json:"port_down,omitempty"`
	}
)

// History is the recent load of a link (utilization, 0-1) or a switch
// (traffic out, bit/s), oldest first, one point per interval.
type History struct {
	IntervalSeconds float64        `json:"interval_seconds"`
	Points          []HistoryPoint `json:"points"`
}

// HistoryPoint is one sample: Unix time (seconds) and value.
type HistoryPoint struct {
	T int64   `json:"t"`
	V float64 `json:"v"`
}

// TopologyDelta is what changed in the topology view since the last event
// of a stream (its switches, links and hosts by name, whole): after the
// first whole TopologyView, /api/v1/stream sends these while the
// topology's revision stays, and a whole view again when it moves.
type TopologyDelta struct {
	Revision int64        `json:"revision"`
	Switches []SwitchView `json:"switches,omitempty"`
	Links    []LinkView   `json:"links,omitempty"`
	Hosts    []HostView   `json:"hosts,omitempty"`
	// UndeclaredLinks is set when they changed (to none: empty).
	UndeclaredLinks *[]string `json:"undeclared_links,omitempty"`
}
