package controller

import "github.com/accelnet/accelnet/models"

// Congestion-aware weights. Every CongestionInterval the leader looks at
// each fabric link direction's measured utilization and biases the WCMP
// weight of the port that sends into it: a direction at or above
// congestionHigh has its bias cut by congestionStep (not below
// congestionFloor), so the switches feeding it send a smaller share there;
// a biased direction that stayed at or below congestionLow for
// congestionCalm intervals gets some back (congestionRecover), one step at
// a time. The band between the two thresholds, the calm period and the
// smaller recovery step keep a shifted share from swinging back and forth.
// A change is a planned one: it rolls out in stages like a drain (weights
// alone keep every next hop, so it moves at the first stage).
const (
	congestionHigh    = 0.9
	congestionLow     = 0.6
	congestionStep    = 0.7
	congestionRecover = 1 / 0.85
	congestionFloor   = 0.25
	congestionCalm    = 3
)

// portBias is one port's weight bias and how many intervals it has been calm.
type portBias struct {
	bias float64
	calm int
}

// adjustWeights updates the biases from telemetry and replans if any moved.
func (c *Controller) adjustWeights() {
	st := c.current()
	if st == nil || !c.Leading() {
		return
	}
	c.mu.Lock()
	if c.biasState == nil {
		c.biasState = map[models.Endpoint]*portBias{}
	}
	changed := false
	for _, l := range st.snap.FabricLinks() {
		if st.down[l.ID()] || l.Gbps <= 0 {
			continue
		}
		for _, e := range []models.Endpoint{l.A, l.B} {
			pl, ok := c.tele.Port(e)
			if !ok || pl.Stale {
				continue
			}
			u := pl.OutBps / (l.Gbps * 1e9)
			p := c.biasState[e]
			if p == nil {
				p = &portBias{bias: 1}
			}
			switch {
			case u >= congestionHigh && p.bias > congestionFloor:
				p.bias, p.calm, changed = max(congestionFloor, p.bias*congestionStep), 0, true
			case u <= congestionLow && p.bias < 1:
				if p.calm++; p.calm >= congestionCalm {
					p.bias, p.calm, changed = min(1, p.bias*congestionRecover), 0, true
				}
			default:
				p.calm = 0
			}
			if p.bias >= 1 {
				delete(c.biasState, e)
			} else {
				c.biasState[e] = p
			}
		}
	}
	c.mu.Unlock()
	if changed {
		c.m.weightChanges.Inc()
		c.refreshDown("congestion weights changed", "ports_biased", len(c.Biases()))
	}
}

// Biases returns the current WCMP weight bias of every biased port.
func (c *Controller) Biases() map[models.Endpoint]float64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.biasesLocked()
}

func (c *Controller) biasesLocked() map[models.Endpoint]float64 {
	out := make(map[models.Endpoint]float64, len(c.biasState))
	for e, p := range c.biasState {
		out[e] = p.bias
	}
	return out
}
