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
}

// counts are figures the controller keeps itself, exported as they are.
type counts struct {
	samples, weightChanges func() int64
	atOnce                 func() int
	rollingOut             func() bool
}

func newMetrics(reg prometheus.Registerer, n counts) *metrics {
	m := &metrics{
		reconcileTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "accelnet_reconcile_total",
			Help: "Reconciles by controller and result (ok, error, noop).",
		}, []string{"controller", "result"}),
		reconcileDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "accelnet_reconcile_duration_seconds",
			Help:    "Time to reconcile one key: read back, diff and write.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"controller"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "accelnet_southbound_updates_total",
			Help: "P4Runtime updates written, by type.",
		}, []string{"type"}),
		pathcalcSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "accelnet_pathcalc_solve_seconds",
			Help:    "Time to compute the fabric's routes.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}),
		linksDiscovered: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "accelnet_links_discovered",
			Help: "Declared fabric links by what link discovery says of them: confirmed, miswired (routes avoid them), missing, down or pending.",
		}, []string{"state"}),
		linksUndeclared: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "accelnet_links_undeclared",
			Help: "Links link discovery hears where the topology declares none.",
		}),
		livenessInterval: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "accelnet_link_liveness_interval_seconds",
			Help: "How often link liveness probes each watched link end (those on switches that report no oper-status): a cut link is lost 3 to 4 intervals after. Longer than --liveness-interval when the probe budget makes it so.",
		}),
		livenessEnds: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "accelnet_link_liveness_watched_ends",
			Help: "Fabric link ends on switches that report no oper-status, which link liveness probes.",
		}),
		arp: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "accelnet_host_arp_total",
			Help: "Hosts' ARP as the controller handled it: answered (a host's request, with its leaf port's MAC), learned (a host's MAC new or changed), probe_sent (who has a host's address), not_a_host_port, wrong_address (not the topology's host there), dropped (over the per-port rate or a full queue).",
		}, []string{"result"}),
		foreignPrimary: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "accelnet_switch_foreign_primary",
			Help: "1 while a controller that is not one of accelnet's replicas holds the primary role on the switch (a higher P4Runtime election ID); accelnet retries with backoff and keeps programming the rest.",
		}, []string{"switch"}),
		switchInSync: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "accelnet_switch_in_sync",
			Help: "1 if the switch's last reconcile found or made it match the plan.",
		}, []string{"switch"}),
		linkUtilization: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "accelnet_link_utilization_ratio",
			Help: "Measured load of the busier direction of a link over its capacity.",
		}, []string{"link"}),
		linkECN: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "accelnet_link_ecn_marked_bits_per_second",
			Help: "ECN-marked (Congestion Experienced) traffic of the busier-marking direction of a link, from the switches' QoS queue counters.",
		}, []string{"link"}),
		topologyRevision: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "accelnet_topology_revision",
			Help: "etcd revision of the topology the controller acts on.",
		}),
		linksDown: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "accelnet_links_down",
			Help: "Links reported down over gNMI that routes avoid.",
		}),
		fullReads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "accelnet_reconcile_full_reads_total",
			Help: "Reconciles that read a switch's tables in full (first contact, reconnect, error, periodic resync).",
		}),
		failureHandling: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "accelnet_failure_handling",
			Help: "1 while a link failure's rollout is under way, and the periodic resync and link discovery wait for it; else 0.",
		}),
		handover: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "accelnet_handover_switches_total",
			Help: "Switches' first reconciles of a leader's term by what their handover mark allowed: trusted (probed: members, punts and hash seed; the rest taken as the previous term confirmed it), pins_trusted (read but for the flow pins, taken as confirmed: this term wants other routes), or read in full because unmarked (written when the previous leader stopped, or never marked), pins_changed (this term wants other flow pins), probe_differs or probe_failed.",
		}, []string{"result"}),
		handoverUnsettled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "accelnet_handover_unsettled_reads_total",
			Help: "Switches a new term took as marked after reading by key the pins of intents not yet Installed (their leader may not have written them); each is also counted in accelnet_handover_switches_total.",
		}),
		marks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "accelnet_handover_marks_total",
			Help: "Handover marks written to etcd: put (a quiet switch's confirmed state recorded) and delete (removed before a write to the switch).",
		}, []string{"op"}),
		rerouteDelay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "accelnet_oper_status_reroute_seconds",
			Help:    "From a switch's report that a fabric port went down or up (its gNMI notification's timestamp) to the controller rerouting around it: the stream's transit and the controller's intake.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
	}
	if reg != nil {
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
		reg.MustRegister(m.reconcileTotal, m.reconcileDuration, m.writes, m.pathcalcSeconds,
			m.switchInSync, m.foreignPrimary, m.linksDiscovered, m.linksUndeclared, m.linkUtilization, m.linkECN, m.topologyRevision, m.linksDown, m.fullReads, m.rerouteDelay, m.failureHandling, m.handover, m.handoverUnsettled, m.marks, m.arp, m.livenessInterval, m.livenessEnds)
	}
	return m
}
