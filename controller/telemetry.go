package controller

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound"
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
}

// counter is the last value of one monotonic counter and when it was read.
type counter struct {
	value uint64
	ts    time.Time
	bps   float64
	valid bool
}

// observe folds a new reading in and returns the smoothed rate in bits/s.
func (c *counter) observe(value uint64, ts time.Time, alpha float64) float64 {
	if c.valid && ts.After(c.ts) {
		if value < c.value { // counter reset (switch restart): start over
			c.bps = 0
		} else {
			r := float64(value-c.value) * 8 / ts.Sub(c.ts).Seconds()
			if c.bps == 0 {
				c.bps = r
			} else {
				c.bps = alpha*r + (1-alpha)*c.bps
			}
		}
	}
	if !c.valid || ts.After(c.ts) {
		c.value, c.ts, c.valid = value, ts, true
	}
	return c.bps
}

type portStat struct {
	in, out, drops counter
	ecn            map[string]*counter // by queue
	load           PortLoad
	received       time.Time // local time of the last sample
}

// Telemetry turns gNMI counter samples into per-port rates: the rate over
// each sampling interval, smoothed with an exponentially weighted moving
// average (weight Alpha on the newest interval).
type Telemetry struct {
	Alpha      float64
	StaleAfter time.Duration

	mu    sync.RWMutex
	ports map[models.Endpoint]*portStat
	now   func() time.Time
}

// NewTelemetry returns an empty aggregator.
func NewTelemetry(staleAfter time.Duration) *Telemetry {
	return &Telemetry{Alpha: 0.6, StaleAfter: staleAfter, ports: map[models.Endpoint]*portStat{}, now: time.Now}
}

// Observe folds one sample in.
func (t *Telemetry) Observe(s southbound.CounterSample) {
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
	case southbound.HasInOctets:
		p.load.InBps = p.in.observe(s.InOctets, s.Timestamp, t.Alpha)
	case southbound.HasOutOctets:
		p.load.OutBps = p.out.observe(s.OutOctets, s.Timestamp, t.Alpha)
	case southbound.HasOutDiscards:
		p.load.DropBps = p.drops.observe(s.OutDiscards, s.Timestamp, t.Alpha)
	case southbound.HasOperStatus:
		p.load.OperUp = s.OperUp
	case southbound.HasECNOctets:
		if p.ecn == nil {
			p.ecn = map[string]*counter{}
		}
		q := p.ecn[s.Queue]
		if q == nil {
			q = &counter{}
			p.ecn[s.Queue] = q
		}
		q.observe(s.ECNOctets, s.Timestamp, t.Alpha)
		p.load.ECNBps = 0
		for _, c := range p.ecn {
			p.load.ECNBps += c.bps
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

// subscriptions keeps one gNMI stream per switch, restarting it with
// backoff when it breaks and replacing it when the switch's address changes.
type subscriptions struct {
	log      *slog.Logger
	tele     *Telemetry
	interval time.Duration
	onSample func(southbound.CounterSample)
	dialer   *southbound.Dialer

	mu     sync.Mutex
	active map[models.SwitchID]*subscription
	wg     sync.WaitGroup
}

type subscription struct {
	addr   string
	cancel context.CancelFunc
}

// sync starts streams for new switches and stops those of removed or moved ones.
func (s *subscriptions) sync(ctx context.Context, switches []models.Switch) {
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

func (s *subscriptions) run(ctx context.Context, sw models.Switch) {
	backoff := 100 * time.Millisecond
	for {
		err := southbound.SubscribeCounters(ctx, s.dialer, sw, s.interval, func(cs southbound.CounterSample) {
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

func (s *subscriptions) stop() {
	s.mu.Lock()
	for name, sub := range s.active {
		sub.cancel()
		delete(s.active, name)
	}
	s.mu.Unlock()
	s.wg.Wait()
}
