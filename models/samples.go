// Contracts between the reconciler and the switch drivers: what a driver
// reports (counter and flow samples) and the one refusal the reconciler
// must recognise whatever the protocol.

package models

import (
	"errors"
	"time"
)

// CounterSample is one interface's state at a switch-side timestamp.
type CounterSample struct {
	Switch    SwitchID
	Port      uint32
	Timestamp time.Time
	// Exactly the fields the update carried are set; Has says which.
	InOctets, OutOctets, OutDiscards uint64
	OperUp                           bool
	// ECNOctets is one egress queue's ECN-marked octets (Queue names it):
	// OpenConfig QoS /qos/interfaces/interface/output/queues/queue/state/
	// ecn-marked-octets, as SONiC serves it.
	ECNOctets uint64
	// QueueBytes is the queue's depth now, QueueMaxBytes the highest
	// since the last sample, bytes (OpenConfig QoS avg-queue-len and
	// max-queue-len).
	QueueBytes, QueueMaxBytes uint64
	Queue                     string
	Has                       SampleFields
}

// SampleFields says which fields of a CounterSample an update carried.
type SampleFields uint8

const (
	HasInOctets SampleFields = 1 << iota
	HasOutOctets
	HasOutDiscards
	HasOperStatus
	HasECNOctets
	HasQueueLen
	HasQueueMax
)

// FlowSample is one packet a switch sampled and reported in a
// flow_sample_t digest: where it entered, its flow key and its length.
type FlowSample struct {
	Port  uint32 // the ingress port (a host-facing port)
	Key   FlowKey
	Bytes uint32 // the IPv4 total length
	// At is when the switch made the digest list (its own clock; zero if
	// it does not say): gaps between samples are measured on it, so a
	// list that waited in a busy controller's queue does not look late.
	At time.Time
	// Stands is how many samples this one stands for (1, or more when
	// the controller, too busy to take every list, dropped some since the
	// last list it took): rates estimated from the samples stay unbiased.
	Stands float64
}

// ErrNotPrimary means a switch refused us as primary: another client holds
// a higher election ID. A controller that sees it must stop programming (a
// newer leader exists, or a foreign controller took the switch).
var ErrNotPrimary = errors.New("not the primary controller for this switch")
