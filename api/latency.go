package api

import "time"

// LatencySource says where a latency figure comes from: "queues" is
// assembled from each hop's queue depth as its switch reports it
// (OpenConfig QoS avg-queue-len over gNMI) plus the configured fixed
// cost of a hop (LatencyModel).
const LatencySource = "queues"

// LatencyModel is the fixed cost of a hop the figures assume: the
// switch's own forwarding time, the cable's propagation and putting one
// packet on the wire at the egress port's rate. Configured, not measured.
type LatencyModel struct {
	SwitchDelayNs int `json:"switch_delay_ns"`
	LinkDelayNs   int `json:"link_delay_ns"`
	PacketBytes   int `json:"packet_bytes"`
}

// HopLatency is one hop of a path: the egress port a packet leaves by,
// its queue's depth now and what the hop costs, microseconds.
type HopLatency struct {
	Switch     string  `json:"switch"`
	Port       uint32  `json:"port"`
	QueueBytes float64 `json:"queue_bytes"`
	QueueingUs float64 `json:"queueing_us"`
	FixedUs    float64 `json:"fixed_us"`
	// Measured says the port's queue is known (else it counts as empty):
	// its switch reports it, or (Probed) a latency probe met it lately.
	Measured bool `json:"measured"`
	// Probed says the queue is the one the pingmesh's probes last met
	// there: the switch reports no depth over gNMI.
	Probed bool `json:"probed"`
}

// PathLatency is one path's one-way latency, microseconds: now, and the
// median and 99th percentile over the window's sampling intervals.
type PathLatency struct {
	Hops  []HopLatency `json:"hops"`
	NowUs float64      `json:"now_us"`
	P50Us float64      `json:"p50_us"`
	P99Us float64      `json:"p99_us"`
}

// PairLatency is the one-way latency between two leaves or two hosts
// (GET /api/v1/latency?src=&dst=): over every equal-cost path between
// them (ECMP spreads flows over all; a host pair's latency is its
// paths'), now (the mean over the paths) and as the median and 99th
// percentile over paths and the window's intervals.
type PairLatency struct {
	Src       string        `json:"src"`
	Dst       string        `json:"dst"`
	Source    string        `json:"source"`
	Window    time.Duration `json:"window_ns"`
	Intervals int           `json:"intervals"`
	NowUs     float64       `json:"now_us"`
	P50Us     float64       `json:"p50_us"`
	P99Us     float64       `json:"p99_us"`
	Paths     []PathLatency `json:"paths"`
	Model     LatencyModel  `json:"model"`
	// Probes is what the pingmesh's probes between the two leaves (a
	// host's leaf stands for it) measured in the window; absent if none
	// came back in it.
	Probes *ProbedLatency `json:"probes,omitempty"`
}

// ProbedLatency is a leaf pair's latency as its probes measured it end
// to end (the pingmesh): how many came back in the window, their median
// and 99th percentile, and the last one's path, microseconds. A probe's
// latency is what each switch on its way recorded from its ingress to its
// egress (queueing included) plus the configured propagation of each
// link it crossed.
type ProbedLatency struct {
	Count int        `json:"count"`
	P50Us float64    `json:"p50_us"`
	P99Us float64    `json:"p99_us"`
	Last  ProbedPath `json:"last"`
}

// ProbedPath is the path one probe took, hop by hop, and what it met.
type ProbedPath struct {
	At         time.Time   `json:"at"`
	LatencyUs  float64     `json:"latency_us"`
	QueueingUs float64     `json:"queueing_us"`
	Hops       []ProbedHop `json:"hops"`
}

// ProbedHop is what a switch recorded of a probe at the egress port it
// left by: the time it spent in the port's queue and the queue's depth
// when it arrived there (packets), and the time from its ingress to its
// egress, in the switch's own units (BMv2 and fabricsim count whole
// microseconds).
type ProbedHop struct {
	Switch       string  `json:"switch"`
	Port         uint32  `json:"port"`
	QueueUs      float64 `json:"queue_us"`
	QueuePackets uint32  `json:"queue_packets"`
	HopUs        float64 `json:"hop_us"`
}

// LatencyMatrix is every leaf pair's latency now (GET /api/v1/latency
// without src and dst): Leaves name the rows (sources) and columns
// (destinations); MeanUs[i][j] is the mean over the pair's paths and
// WorstUs[i][j] its slowest path, microseconds (0 on the diagonal).
type LatencyMatrix struct {
	Source  string      `json:"source"`
	At      time.Time   `json:"at"`
	Leaves  []string    `json:"leaves"`
	MeanUs  [][]float64 `json:"mean_us"`
	WorstUs [][]float64 `json:"worst_us"`
}
