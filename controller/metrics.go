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
	linkUtilization   *prometheus.GaugeVec
	topologyRevision  prometheus.Gauge
	linksDown         prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
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
		switchInSync: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "accelnet_switch_in_sync",
			Help: "1 if the switch's last reconcile found or made it match the plan.",
		}, []string{"switch"}),
		linkUtilization: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "accelnet_link_utilization_ratio",
			Help: "Measured load of the busier direction of a link over its capacity.",
		}, []string{"link"}),
		topologyRevision: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "accelnet_topology_revision",
			Help: "etcd revision of the topology the controller acts on.",
		}),
		linksDown: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "accelnet_links_down",
			Help: "Links reported down over gNMI that routes avoid.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.reconcileTotal, m.reconcileDuration, m.writes, m.pathcalcSeconds,
			m.switchInSync, m.linkUtilization, m.topologyRevision, m.linksDown)
	}
	return m
}
