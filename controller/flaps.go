package controller

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/accelnet/accelnet/models"
)

// Flap dampening, after BGP route-flap damping (RFC 2439): every failure
// of a link adds a penalty that halves every half-life. A link whose
// penalty passes suppressAt is kept out of routes even while it is up,
// until the penalty decays below reuseAt. One failure never suppresses;
// two close together do, so a link bouncing every few seconds stops
// dragging the fabric through reprogramming.
const (
	flapPenalty = 1000.0
	suppressAt  = 1500.0
	reuseAt     = 750.0
)

type flapDamper struct {
	halfLife time.Duration
	mu       sync.Mutex
	links    map[models.LinkID]*flapState
}

type flapState struct {
	penalty    float64
	at         time.Time
	suppressed bool
}

func newFlapDamper(halfLife time.Duration) *flapDamper {
	return &flapDamper{halfLife: halfLife, links: map[models.LinkID]*flapState{}}
}

func (d *flapDamper) decay(s *flapState, now time.Time) {
	if dt := now.Sub(s.at); dt > 0 {
		s.penalty *= math.Exp2(-dt.Seconds() / d.halfLife.Seconds())
		s.at = now
	}
}

// failed records a failure of link id.
func (d *flapDamper) failed(id models.LinkID, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.links[id]
	if s == nil {
		s = &flapState{at: now}
		d.links[id] = s
	}
	d.decay(s, now)
	s.penalty += flapPenalty
}

// suppressed lists the links kept out now, forgetting settled ones.
func (d *flapDamper) suppressed(now time.Time) []models.LinkID {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []models.LinkID
	for id, s := range d.links {
		d.decay(s, now)
		switch {
		case s.penalty >= suppressAt:
			s.suppressed = true
		case s.penalty < reuseAt:
			s.suppressed = false
		}
		if s.suppressed {
			out = append(out, id)
		}
		if s.penalty < 1 {
			delete(d.links, id)
		}
	}
	slices.Sort(out)
	return out
}

// Dampened lists the links flap dampening keeps out of routes now.
func (c *Controller) Dampened() []models.LinkID { return c.flaps.suppressed(c.cfg.Now()) }

// Drained lists what operators drained: switches, and every link drained
// (by itself or with a switch).
func (c *Controller) Drained() (switches []models.SwitchID, links map[models.LinkID]bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	links = map[models.LinkID]bool{}
	if c.state == nil {
		return nil, links
	}
	for _, d := range c.drains {
		if d.Switch != "" {
			switches = append(switches, d.Switch)
		}
	}
	slices.Sort(switches)
	return switches, drainedLinks(c.state.snap, c.drains)
}
