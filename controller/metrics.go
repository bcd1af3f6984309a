package controller

import (
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	reconcileTotal    *prometheus.CounterVec
	reconcileDuration *prometheus.HistogramVec
	writes            *prometheus.CounterVec
	pathcalcSeconds   prometheus.Histogram
	switchInSync      *prometheus.GaugeVec
	foreignPrimary    *prometheus.GaugeVec
	linksDiscovered   *prometheus.GaugeVec
	linksUndeclared   prometheus.Gauge
	linkUtilization   *prometheus.GaugeVec
	linkECN           *prometheus.GaugeVec
	topologyRevision  prometheus.Gauge
	linksDown         prometheus.Gauge
	fullReads         prometheus.Counter
	rerouteDelay      prometheus.Histogram
	failureHandling   prometheus.Gauge
	handover          *prometheus.CounterVec
	handoverUnsettled prometheus.Counter
	marks             *prometheus.CounterVec
	arp               *prometheus.CounterVec
	livenessInterval  prometheus.Gauge
	livenessEnds      prometheus.Gauge
	queueDelay        prometheus.Histogram
	pairLatency       prometheus.Histogram
	probes            *prometheus.CounterVec
	probeLatency      prometheus.Histogram
}

// counts are figures the controller keeps itself, exported as they are.
type counts struct {
	samples, weightChanges func() int64
	atOnce                 func() int
	rollingOut             func() bool
}

func newMetrics(reg prometheus.Registerer, n counts) *metrics {
	m := &metrics{
		reconcileTotal:    counterVec("accelnet_reconcile_total", "Reconciles by controller and result (ok, error, noop).", "controller", "result"),
		reconcileDuration: histogramVec("accelnet_reconcile_duration_seconds", "Time to reconcile one key: read back, diff and write.", prometheus.ExponentialBuckets(0.0005, 2, 16), "controller"),
		writes:            counterVec("accelnet_southbound_updates_total", "P4Runtime updates written, by type.", "type"),
		pathcalcSeconds:   histogram("accelnet_pathcalc_solve_seconds", "Time to compute the fabric's routes.", prometheus.ExponentialBuckets(0.0001, 2, 18)),
		linksDiscovered:   gaugeVec("accelnet_links_discovered", "Declared fabric links by what link discovery says of them: confirmed, miswired (routes avoid them), missing, down or pending.", "state"),
		linksUndeclared:   gauge("accelnet_links_undeclared", "Links link discovery hears where the topology declares none."),
		livenessInterval:  gauge("accelnet_link_liveness_interval_seconds", "How often link liveness probes each watched link end (those on switches that report no oper-status): a cut link is lost 3 to 4 intervals after. Longer than --liveness-interval when the probe budget makes it so."),
		livenessEnds:      gauge("accelnet_link_liveness_watched_ends", "Fabric link ends on switches that report no oper-status, which link liveness probes."),
		arp:               counterVec("accelnet_host_arp_total", "Hosts' ARP as the controller handled it: answered (a host's request, with its leaf port's MAC), learned (a host's MAC new or changed), probe_sent (who has a host's address), not_a_host_port, wrong_address (not the topology's host there), dropped (over the per-port rate or a full queue).", "result"),
		foreignPrimary:    gaugeVec("accelnet_switch_foreign_primary", "1 while a controller that is not one of accelnet's replicas holds the primary role on the switch (a higher P4Runtime election ID); accelnet retries with backoff and keeps programming the rest.", "switch"),
		switchInSync:      gaugeVec("accelnet_switch_in_sync", "1 if the switch's last reconcile found or made it match the plan.", "switch"),
		linkUtilization:   gaugeVec("accelnet_link_utilization_ratio", "Measured load of the busier direction of a link over its capacity.", "link"),
		linkECN:           gaugeVec("accelnet_link_ecn_marked_bits_per_second", "ECN-marked (Congestion Experienced) traffic of the busier-marking direction of a link, from the switches' QoS queue counters.", "link"),
		topologyRevision:  gauge("accelnet_topology_revision", "etcd revision of the topology the controller acts on."),
		linksDown:         gauge("accelnet_links_down", "Links reported down over gNMI that routes avoid."),
		fullReads:         counter("accelnet_reconcile_full_reads_total", "Reconciles that read a switch's tables in full (first contact, reconnect, error, periodic resync)."),
		failureHandling:   gauge("accelnet_failure_handling", "1 while a link failure's rollout is under way, and background work waits for it (the periodic resync, link discovery, host probes) or skips its rounds (the load export and history); else 0."),
		handover:          counterVec("accelnet_handover_switches_total", "Switches' first reconciles of a leader's term by what their handover mark allowed: trusted (probed: members, punts and hash seed; the rest taken as the previous term confirmed it), pins_trusted (read but for the flow pins, taken as confirmed: this term wants other routes), or read in full because unmarked (written when the previous leader stopped, or never marked), pins_changed (this term wants other flow pins), probe_differs or probe_failed.", "result"),
		handoverUnsettled: counter("accelnet_handover_unsettled_reads_total", "Switches a new term took as marked after reading by key the pins of intents not yet Installed (their leader may not have written them); each is also counted in accelnet_handover_switches_total."),
		marks:             counterVec("accelnet_handover_marks_total", "Handover marks written to etcd: put (a quiet switch's confirmed state recorded) and delete (removed before a write to the switch).", "op"),
		queueDelay:        histogram("accelnet_queue_delay_seconds", "Egress queueing delay of switch ports as their switches report them (OpenConfig QoS avg-queue-len at the port's rate), one observation per port and sample.", prometheus.ExponentialBuckets(1e-7, 2, 14)),
		probes:            counterVec("accelnet_latency_probes_total", "The pingmesh's latency probes: sent, not_sent (the switch could not be reached), received, lost (not back within 10 s), misrouted (back from another switch than the destination leaf, or by another path than the hops recorded), unknown (not one this replica sent).", "result"),
		probeLatency:      histogram("accelnet_probe_latency_seconds", "One-way latency between two leaves as the pingmesh's probes measure it: each switch's ingress-to-egress time they recorded plus the configured link propagation, one observation per probe back.", prometheus.ExponentialBuckets(1e-6, 1.5, 18)),
		pairLatency:       histogram("accelnet_leaf_pair_latency_seconds", "One-way latency between two leaves, the mean over their equal-cost paths of each hop's queueing delay and fixed cost, one observation per leaf pair and telemetry interval (fabrics of up to 64 leaves).", prometheus.ExponentialBuckets(1e-6, 1.5, 18)),
		rerouteDelay:      histogram("accelnet_oper_status_reroute_seconds", "From a switch's report that a fabric port went down or up (its gNMI notification's timestamp) to the controller rerouting around it: the stream's transit and the controller's intake.", prometheus.ExponentialBuckets(0.001, 2, 16)),
	}
	if reg != nil {
		registerCounts(reg, n)
		reg.MustRegister(m.reconcileTotal, m.reconcileDuration, m.writes, m.pathcalcSeconds,
			m.switchInSync, m.foreignPrimary, m.linksDiscovered, m.linksUndeclared, m.linkUtilization, m.linkECN, m.topologyRevision, m.linksDown, m.fullReads, m.rerouteDelay, m.failureHandling, m.handover, m.handoverUnsettled, m.marks, m.arp, m.livenessInterval, m.livenessEnds, m.queueDelay, m.pairLatency, m.probes, m.probeLatency)
	}
	return m
}

// registerCounts exports the figures the controller keeps itself.
func registerCounts(reg prometheus.Registerer, n counts) {
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "accelnet_telemetry_samples_total",
		Help: "Interface counter and status values taken in over gNMI (one counter of one port each).",
	}, func() float64 { return float64(n.samples()) }), prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "accelnet_congestion_weight_changes_total",
		Help: "Times measured link load moved the congestion-aware WCMP weights (each one a staged rollout).",
	}, func() float64 { return float64(n.weightChanges()) }), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "accelnet_reconciles_at_once",
		Help: "How many switch reconciles (tables, interface config, sampling) may run at once: every worker, halved when reconciles run out their timeout and grown back as they complete in time.",
	}, func() float64 { return float64(n.atOnce()) }), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "accelnet_rollout_in_progress",
		Help: "1 while the leader changes the fabric's routes (a failure, a return, a drain, new weights): from the change until its rollout's last stage is confirmed, planning included; else 0.",
	}, func() float64 {
		if n.rollingOut() {
			return 1
		}
		return 0
	}))
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

func gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

func histogram(name, help string, buckets []float64) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
}

func histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}
