package intents

import (
	"errors"

	"github.com/accelnet/accelnet/models"
	"github.com/prometheus/client_golang/prometheus"
)

type intentMetrics struct {
	decisions     *prometheus.CounterVec
	commitSeconds prometheus.Histogram
	commitOps     prometheus.Histogram
	overcommitted prometheus.Counter
}

func newIntentMetrics(reg prometheus.Registerer, counts func() map[models.IntentState]int) *intentMetrics {
	m := &intentMetrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "accelnet_intent_requests_total",
			Help: "Intent creates, updates and deletes by result (ok, refused, invalid, error).",
		}, []string{"result"}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "accelnet_intent_commit_seconds",
			Help:    "Time to commit one batch of intent changes to etcd.",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16),
		}),
		commitOps: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "accelnet_intent_commit_ops",
			Help:    "etcd operations per intent commit (admissions arriving together share one).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12),
		}),
		overcommitted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "accelnet_ledger_overcommitted_total",
			Help: "Decisions after which a link direction or NIC was reserved above its capacity less the headroom (a bug: should stay 0).",
		}),
	}
	if reg != nil {
		states := prometheus.NewDesc("accelnet_intents", "Manager by lifecycle state.", []string{"state"}, nil)
		reg.MustRegister(m.decisions, m.commitSeconds, m.commitOps, m.overcommitted, &stateCollector{desc: states, counts: counts})
	}
	return m
}

// stateCollector reports intents by state at scrape time.
type stateCollector struct {
	desc   *prometheus.Desc
	counts func() map[models.IntentState]int
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.counts()
	for _, s := range models.ValidStates {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
}

func decisionResult(opErr, commitErr error) string {
	switch {
	case commitErr != nil:
		return "error"
	case opErr == nil:
		return "ok"
	case errors.Is(opErr, models.ErrInvalid):
		return "invalid"
	default:
		return "refused"
	}
}
