package intents

import (
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/accelnet/accelnet/models"
)

// Elephants finds the heavy flows nobody declared. Leaves sample 1 in
// OneIn RoCEv2 packets their hosts send (Config.SampleOneIn) and report
// them as digests; each sample stands for OneIn packets of its length.
// Per flow, the bytes are smoothed with an exponential decay of time
// constant Tau, so the estimate follows a flow's rate within a few Tau and
// forgets a flow that stops. Flows estimated at Threshold or more, from at
// least MinSamples samples, are elephants: the intents manager pins them
// on paths chosen together (see Intents.placeDetected) instead of leaving
// them to hashing.
type Elephants struct {
	OneIn      float64
	Threshold  float64 // Gb/s
	Tau        time.Duration
	MinSamples int
	// Measured, if set, is a pinned flow's rate from its pin's counter
	// and when it was read (ok false: not read yet, or not pinned).
	Measured func(models.FlowKey) (gbps float64, at time.Time, ok bool)
	// Fresh is how old a Measured reading may be and still be trusted
	// (a few reads' worth).
	Fresh time.Duration

	mu    sync.Mutex
	flows map[models.FlowKey]*sampledFlow
	// leafClock is, per leaf, the latest time on its own clock a digest
	// list it sent was made (FlowSample.At).
	leafClock map[models.SwitchID]time.Time
	// leafGap is, per leaf, the (smoothed) time between its lists: a
	// list's samples were taken over the gap before its stamp, on
	// average half a gap earlier.
	leafGap map[models.SwitchID]time.Duration
	now     func() time.Time
	samples prometheus.Counter
}

type sampledFlow struct {
	leaf    models.SwitchID
	port    uint32
	bytes   float64   // decayed, as of last
	last    time.Time // its last sample's time: on the leaf's clock if leafTime, else when it arrived
	arrived time.Time // when its last sample arrived (the controller's clock)
	// leafTime says last is on the leaf's clock (its lists are stamped).
	leafTime bool
	samples  int
	length   float64 // mean IP length of its samples
}

// DetectedFlow is a flow Elephants estimates at or above its threshold.
type DetectedFlow struct {
	Key  models.FlowKey
	Leaf models.SwitchID // where it enters the fabric
	Gbps float64
	// Measured says Gbps comes from the flow's pin counter, not samples.
	Measured bool
	// Above says Gbps is at the threshold or more. Detected also lists
	// flows down to half the threshold: a flow already pinned stays an
	// elephant until it falls under that (hysteresis), so an estimate
	// wandering around the threshold does not pin and unpin it in turn.
	Above bool
}

// NewElephants returns a detector for samples taken 1 in oneIn, reporting
// flows of threshold Gb/s or more.
func NewElephants(oneIn uint32, threshold float64, reg prometheus.Registerer) *Elephants {
	e := &Elephants{OneIn: float64(oneIn), Threshold: threshold, Tau: time.Second, MinSamples: 8, Fresh: 3 * time.Second,
		flows: map[models.FlowKey]*sampledFlow{}, leafClock: map[models.SwitchID]time.Time{},
		leafGap: map[models.SwitchID]time.Duration{}, now: time.Now,
		samples: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "accelnet_flow_samples_total",
			Help: "Packets leaves sampled and reported (flow_sample digests), each standing for sample-one-in packets.",
		})}
	if reg != nil {
		reg.MustRegister(e.samples)
	}
	return e
}

// Observe folds in the packets a leaf sampled.
func (e *Elephants) Observe(sw models.SwitchID, samples []models.FlowSample) {
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range samples {
		t, leafTime := s.At, !s.At.IsZero()
		if !leafTime {
			t = now
		}
		f := e.flows[s.Key]
		if f == nil || f.leaf != sw || f.leafTime != leafTime {
			f = &sampledFlow{last: t} // new, or now seen on another clock
			e.flows[s.Key] = f
		}
		f.bytes = f.bytes*e.decay(t.Sub(f.last)) + float64(s.Bytes)*e.OneIn*max(1, s.Stands)
		if t.After(f.last) {
			f.last = t
		}
		f.arrived, f.leafTime, f.leaf, f.port = now, leafTime, sw, s.Port
		if last := e.leafClock[sw]; t.After(last) && leafTime {
			if gap := t.Sub(last); !last.IsZero() && gap < e.Tau {
				if g := e.leafGap[sw]; g > 0 {
					gap = (4*g + gap) / 5
				}
				e.leafGap[sw] = gap
			}
			e.leafClock[sw] = t
		}
		f.samples++
		f.length += (float64(s.Bytes) - f.length) / float64(min(f.samples, 64))
	}
	e.samples.Add(float64(len(samples)))
}

func (e *Elephants) decay(d time.Duration) float64 {
	if d <= 0 {
		return 1
	}
	return math.Exp(-d.Seconds() / e.Tau.Seconds())
}

// rateLocked is a flow's estimated rate in Gb/s at t (on its clock). On
// the leaf's clock, a list's bytes count from half a gap before its stamp
// (when, on average, they were sampled): credited at the stamp, a steady
// flow would read high by gap/2τ (2.5% with 50 ms lists).
func (e *Elephants) rateLocked(f *sampledFlow, t time.Time) float64 {
	at := f.last
	if f.leafTime {
		at = at.Add(-e.leafGap[f.leaf] / 2)
	}
	return f.bytes * e.decay(t.Sub(at)) * 8 / e.Tau.Seconds() / 1e9
}

// clockLocked is the time now on a flow's clock: the newest list of its
// leaf, when the leaf stamps its lists (so a list late in arriving decays
// no estimate), else the controller's now.
func (e *Elephants) clockLocked(f *sampledFlow, now time.Time) time.Time {
	if f.leafTime {
		return e.leafClock[f.leaf]
	}
	return now
}

// silence is how many expected gaps between a flow's samples, missing,
// mean it stopped; minSilence is the least time that says so (digest
// lists go out every 50 ms or so). silenceBackstop is how long a flow
// whose leaf sends nothing at all (every flow there stopped, or its
// stream is stalled) stays an elephant by that rule; unreadBackstop is
// how long after its pin counter last said it ran, when that counter has
// not been read since (see silentLocked).
const (
	silence         = 10
	minSilence      = 250 * time.Millisecond
	silenceBackstop = 2 * time.Second
	unreadBackstop  = 10 * time.Second
)

// silentLocked says whether a flow's samples stopped: none for silence
// times the gap its estimated rate would leave between them. A stopped
// flow must not linger as an elephant for the few seconds its decaying
// estimate (or its pin counter, read each second) takes to say so: it
// would take its hosts' NIC share from the flows that replaced it when
// their demands are estimated. The gap is measured on the leaf's clock,
// from the flow's last sample to the newest list the leaf sent: a list
// late in a busy controller's queue delays every flow alike and
// silences none. When the leaf sends nothing at all, or does not stamp
// its lists, the controller's clock says: unheard, the time since the
// flow was last heard of (lastNewsLocked), past at least backstop. Neither
// rule silences a flow a pin counter measures (measured): its samples
// can stop for other reasons — a stream that
// stalled, lists a busy controller or a switch's CPU path dropped, a
// leaf's lists missing its flows for seconds on a busy machine (seen
// beside CPU burners: every pinned flow of a leaf silenced at once, their
// counters reading 60-80 Gb/s) — and the counter, read over its own RPC,
// says whether the flow runs: such a flow goes when that falls under half
// the threshold, a second or two after it stops. A pinned flow whose
// counter said it ran but has not been read lately (the reads time out
// on a starved machine or a slow switch) while its leaf sends nothing
// has no news either way, and stopping is the less likely: the same
// stall holds up both. It stays until unreadBackstop after the later of
// its last sample and that read, not silenceBackstop (seen beside CPU
// burners: a leaf's pinned flows unpinned together, a dozen times a
// minute, their pin counters last read seconds before).
func (e *Elephants) silentLocked(f *sampledFlow, measured bool, unheard, backstop time.Duration) bool {
	if measured || f.samples < e.MinSamples || f.length <= 0 {
		return false
	}
	bps := e.rateLocked(f, f.last) * 1e9 // as of its last sample
	if bps <= 0 {
		return true
	}
	gap := time.Duration(f.length * 8 * e.OneIn / bps * float64(time.Second))
	quiet := max(minSilence, silence*gap)
	if f.leafTime && e.leafClock[f.leaf].Sub(f.last) > quiet {
		return true
	}
	return unheard > max(quiet, backstop)
}

// lastNewsLocked is when a flow was last heard of running, and how long
// without news says it stopped: its last sample and silenceBackstop, or
// the later of that and when its pin counter last vouched for it, and
// unreadBackstop (see silentLocked). A flow whose leaf has sent no list
// at all since its last sample waits unreadBackstop too: the leaf's
// stream stalled (seen on a starved machine: a leaf's every pinned flow
// silenced together, their counters not yet read, then pinned again a
// second later, over and over), or every flow it saw stopped. Neither is
// news of this flow, and once the leaf speaks again its clock says
// within a silence whether the flow still runs.
func (e *Elephants) lastNewsLocked(f *sampledFlow, vouched time.Time) (time.Time, time.Duration) {
	backstop := silenceBackstop
	if !vouched.IsZero() || f.leafTime && !e.leafClock[f.leaf].After(f.last) {
		backstop = unreadBackstop
	}
	if vouched.After(f.arrived) {
		return vouched, backstop
	}
	return f.arrived, backstop
}

// Sampled is a flow's rate (Gb/s) as estimated from its samples alone,
// whether or not a pin counter measures it (for comparing the two).
func (e *Elephants) Sampled(k models.FlowKey) (float64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f, ok := e.flows[k]
	if !ok {
		return 0, false
	}
	return e.rateLocked(f, e.clockLocked(f, e.now())), true
}

// Detected returns the flows estimated at half the threshold or more
// (Above marks those at the threshold), and forgets those that faded
// (no sample for 5 Tau, and no pin counter measuring them; longer for a
// pinned flow whose counter reads are late, see silentLocked).
func (e *Elephants) Detected() []DetectedFlow {
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []DetectedFlow
	for k, f := range e.flows {
		sampled := e.rateLocked(f, e.clockLocked(f, now))
		g, measured := sampled, false
		var vouched time.Time // a counter read that is not fresh, but said it ran
		if e.Measured != nil {
			// A pin counter that did not move between two reads (a
			// switch that syncs its counters from the ASIC late, an
			// emulator whose tick stalled on a busy machine) reads a
			// running flow at 0: while its samples say it runs at half
			// the threshold or more, they are believed instead, or the
			// flow would be unpinned and hashed again. A flow that truly
			// slows shows in both within a few Tau.
			mg, at, ok := e.Measured(k)
			fresh := ok && now.Sub(at) <= e.Fresh
			if ok && !fresh && mg >= e.Threshold/2 {
				vouched = at
			}
			if fresh && (mg >= e.Threshold/2 || sampled < e.Threshold/2 || f.samples < e.MinSamples) {
				g, measured = mg, true
			}
		}
		last, backstop := e.lastNewsLocked(f, vouched)
		unheard := now.Sub(last)
		if !measured && unheard > max(5*e.Tau, backstop) {
			delete(e.flows, k)
			continue
		}
		if e.silentLocked(f, measured, unheard, backstop) {
			continue // stopped: its samples stopped coming
		}
		if g >= e.Threshold/2 && (measured || f.samples >= e.MinSamples) {
			out = append(out, DetectedFlow{Key: k, Leaf: f.leaf, Gbps: g, Measured: measured, Above: g >= e.Threshold})
		}
	}
	return out
}
