// Package telemetry turns what switches report into rates: gNMI interface
// counters into per-port load (links, drops, ECN marks), and flow-pin
// counters into per-flow rates, both through one counter-to-rate
// estimator (RateMeter).
package telemetry

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/accelnet/accelnet/models"
)

// PortLoad is a switch port's measured traffic.
type PortLoad struct {
	InBps, OutBps float64
	DropBps       float64
	// ECNBps is the egress traffic marked Congestion Experienced, bit/s,
	// over all the port's queues (0 where the switch does not report it).
	ECNBps  float64
	OperUp  bool
	Stale   bool // no fresh sample lately (stream down or switch silent)
	Updated time.Time
	// RecentOutBps is the egress rate over the last sampling interval
	// alone (not smoothed: what the port carried just now), RecentSince
	// when that interval began (local time the reading before it
	// arrived; zero until two readings were seen) and RecentUntil when
	// it ended (local time its reading arrived).
	RecentOutBps float64
	RecentSince  time.Time
	RecentUntil  time.Time
	// QueueBytes is the egress queue's depth at the last sample and
	// QueueMaxBytes the highest the switch saw in the interval before it
	// (OpenConfig QoS avg-queue-len and max-queue-len, bytes; of the
	// deepest of the port's queues); QueueMeasured says the switch
	// reports them.
	QueueBytes, QueueMaxBytes float64
	QueueMeasured             bool
}

// reading is a counter's last value, as the switch timed it (a
// RateMeter's reading, one per counter).
type reading struct {
	counterReading
	set bool
}

// smoothed folds a reading of a counter (whose last one is *last) into
// the moving average *bps (bits/s) and returns it. Readings are timed by
// the switch: one not newer than the last changes nothing; a counter that
// went backwards (switch restart) starts over at 0.
// The second result is the rate over this interval alone (bits/s), and
// whether there was one (a reading before it to measure from).
//
// Each port keeps its counters' last readings itself: a RateMeter keyed
// by port, field and queue held 125 MB at k=48 (a map entry and a slice
// per counter, for 138,000 ports).
func (t *Telemetry) smoothed(last *reading, bps *float64, value uint64, ts time.Time) (float64, float64, bool) {
	if last.set && !ts.After(last.at) {
		return *bps, 0, false
	}
	prev := *last
	*last = reading{counterReading{bytes: value, at: ts}, true}
	if !prev.set || !prev.followedBy(value, ts) {
		*bps = 0 // the first reading, or the counter started over
		return 0, 0, false
	}
	bits := prev.gbpsTo(value, ts) * 1e9
	if *bps == 0 {
		*bps = bits
	} else {
		*bps = t.Alpha*bits + (1-t.Alpha)**bps
	}
	return *bps, bits, true
}

type portStat struct {
	in, out, drops float64 // bits/s, smoothed
	// inR, outR, dropR are the counters' last readings.
	inR, outR, dropR reading
	// queues are the egress queues' ECN-marked traffic and depths, in the
	// order first seen (a handful a port: a map per port held 35 MB at
	// k=48).
	queues   []queueStat
	load     PortLoad
	received time.Time // local time of the last sample
	outAt    time.Time // local time of the last egress reading
	queue    *queueRing
}

// queueStat is one egress queue: its ECN-marked traffic (smoothed bits/s
// and the counter's last reading) and its last depths, bytes (now, and
// the highest in the interval before).
type queueStat struct {
	queue      string
	bps        float64
	last       reading
	now, worst float64
}

// queueOf is p's stat of the queue named, added if new.
func (p *portStat) queueOf(name string) *queueStat {
	i := slices.IndexFunc(p.queues, func(q queueStat) bool { return q.queue == name })
	if i < 0 {
		i = len(p.queues)
		p.queues = append(p.queues, queueStat{queue: name})
	}
	return &p.queues[i]
}

// Telemetry turns gNMI counter samples into per-port rates: the rate over
// each sampling interval, smoothed with an exponentially weighted moving
// average (weight Alpha on the newest interval).
type Telemetry struct {
	Alpha      float64
	StaleAfter time.Duration
	// Step is the sampling interval queue depths are kept by (see
	// queueRing); without it only the latest depth is kept.
	Step time.Duration

	mu    sync.RWMutex
	ports map[models.Endpoint]*portStat
	// probed are the queues latency probes met (ObserveProbed).
	probed map[models.Endpoint]*probedQueue
	now    func() time.Time
	// samples counts the values taken in (one per counter or status
	// reading of a port).
	samples atomic.Int64
}

// Samples is how many values (one counter or status reading of one
// port each) were taken in so far.
func (t *Telemetry) Samples() int64 { return t.samples.Load() }

// NewTelemetry returns an empty aggregator.
func NewTelemetry(staleAfter time.Duration) *Telemetry {
	return &Telemetry{Alpha: 0.6, StaleAfter: staleAfter, ports: map[models.Endpoint]*portStat{}, now: time.Now}
}

// Observe folds one sample in.
func (t *Telemetry) Observe(s models.CounterSample) {
	t.samples.Add(1)
	e := models.Endpoint{Switch: s.Switch, Port: s.Port}
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.ports[e]
	if p == nil {
		p = &portStat{}
		t.ports[e] = p
	}
	p.received = t.now()
	p.load.Updated = p.received
	switch s.Has {
	case models.HasInOctets:
		p.load.InBps, _, _ = t.smoothed(&p.inR, &p.in, s.InOctets, s.Timestamp)
	case models.HasOutOctets:
		var recent float64
		var ok bool
		p.load.OutBps, recent, ok = t.smoothed(&p.outR, &p.out, s.OutOctets, s.Timestamp)
		if ok {
			p.load.RecentOutBps, p.load.RecentSince, p.load.RecentUntil = recent, p.outAt, p.received
		}
		p.outAt = p.received
	case models.HasOutDiscards:
		p.load.DropBps, _, _ = t.smoothed(&p.dropR, &p.drops, s.OutDiscards, s.Timestamp)
	case models.HasOperStatus:
		p.load.OperUp = s.OperUp
		if !s.OperUp {
			// A down port carries nothing: no decaying average of what
			// it carried, and it starts afresh when it comes back.
			p.in, p.out, p.drops = 0, 0, 0
			for i := range p.queues {
				p.queues[i].bps, p.queues[i].now, p.queues[i].worst = 0, 0, 0
			}
			p.load.InBps, p.load.OutBps, p.load.DropBps, p.load.ECNBps, p.load.RecentOutBps = 0, 0, 0, 0, 0
			p.load.QueueBytes, p.load.QueueMaxBytes = 0, 0
		}
	case models.HasQueueLen, models.HasQueueMax:
		t.observeQueue(p, s)
	case models.HasECNOctets:
		q := p.queueOf(s.Queue)
		t.smoothed(&q.last, &q.bps, s.ECNOctets, s.Timestamp)
		p.load.ECNBps = 0
		for _, q := range p.queues {
			p.load.ECNBps += q.bps
		}
	}
}

// Port returns a port's load.
func (t *Telemetry) Port(e models.Endpoint) (PortLoad, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	p := t.ports[e]
	if p == nil {
		return PortLoad{}, false
	}
	l := p.load
	l.Stale = t.StaleAfter > 0 && t.now().Sub(p.received) > t.StaleAfter
	return l, true
}

// MarkStale flags every port of a switch stale (its stream is down).
func (t *Telemetry) MarkStale(sw models.SwitchID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for e, p := range t.ports {
		if e.Switch == sw {
			p.received = time.Time{}
		}
	}
}

// CounterSource streams a switch's interface counters (southbound's gNMI
// client), calling fn with each sample and synced once the stream is up,
// until ctx ends or the stream breaks.
type CounterSource interface {
	SubscribeCounters(ctx context.Context, sw models.Switch, interval time.Duration, fn func(models.CounterSample), synced func()) error
}

// Streams keeps one counter stream per switch, restarting it with backoff
// when it breaks and replacing it when the switch's address changes.
type Streams struct {
	log      *slog.Logger
	tele     *Telemetry
	interval time.Duration
	onSample func(models.CounterSample)
	source   CounterSource

	mu     sync.Mutex
	active map[models.SwitchID]*subscription
	wg     sync.WaitGroup
}

// NewStreams returns a stream keeper feeding tele, and onSample (if set)
// with every sample, from source at the given sampling interval.
func NewStreams(source CounterSource, tele *Telemetry, interval time.Duration, onSample func(models.CounterSample), log *slog.Logger) *Streams {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Streams{log: log, tele: tele, interval: interval, onSample: onSample, source: source, active: map[models.SwitchID]*subscription{}}
}

type subscription struct {
	addr   string
	cancel context.CancelFunc
}

// Sync starts streams for new switches and stops those of removed or moved ones.
// Without a source (a controller with no telemetry) it does nothing.
func (s *Streams) Sync(ctx context.Context, switches []models.Switch) {
	if s.source == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	want := map[models.SwitchID]models.Switch{}
	for _, sw := range switches {
		want[sw.Name] = sw
	}
	for name, sub := range s.active {
		if sw, ok := want[name]; !ok || sw.GNMIAddr != sub.addr {
			sub.cancel()
			delete(s.active, name)
		}
	}
	for name, sw := range want {
		if _, ok := s.active[name]; ok || sw.GNMIAddr == "" {
			continue
		}
		subCtx, cancel := context.WithCancel(ctx)
		s.active[name] = &subscription{addr: sw.GNMIAddr, cancel: cancel}
		s.wg.Go(func() { s.run(subCtx, sw) })
	}
}

func (s *Streams) run(ctx context.Context, sw models.Switch) {
	backoff := 100 * time.Millisecond
	for {
		err := s.source.SubscribeCounters(ctx, sw, s.interval, func(cs models.CounterSample) {
			s.tele.Observe(cs)
			if s.onSample != nil {
				s.onSample(cs)
			}
		}, func() { backoff = 100 * time.Millisecond })
		if ctx.Err() != nil {
			return
		}
		s.tele.MarkStale(sw.Name)
		s.log.Warn("gnmi stream broke; resubscribing", "switch", sw.Name, "err", err, "after", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// Stop ends every stream and waits for them.
func (s *Streams) Stop() {
	s.mu.Lock()
	for name, sub := range s.active {
		sub.cancel()
		delete(s.active, name)
	}
	s.mu.Unlock()
	s.wg.Wait()
}
