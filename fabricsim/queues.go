package fabricsim

import (
	"github.com/accelnet/accelnet/models"
)

// The egress queue model. fabricsim's dataplane is flow-level: rates are
// max-min fair and nothing is a packet, so a queue's depth is what that
// steady state implies, per egress port, from what the port sends (s),
// by how many flows (n), and what it is offered (o, the senders' demands
// before congestion control), against what it can send (c):
//
//   - Nothing offered beyond c: the queue n paced flows build at
//     utilization ρ = s/c. One flow builds none (it arrives no faster
//     than the port sends); as flows multiply it tends to an M/D/1
//     server's mean of ρ²/(2(1−ρ)) packets: that times (n−1)/n, with ρ
//     at most 0.99, and no deeper than the ECN marking threshold Kmin
//     (from there on ECN holds it). Idle ports have none; a port at 90%
//     of many flows about four packets. (What it sends, not what it is
//     offered: downstream of another bottleneck a flow arrives at the
//     rate DCQCN left it.)
//   - A bottleneck (s = c, o > c), DCQCN's steady state: ECN marks the
//     excess fraction m = (o−c)/o of what the port sends, which RED-style
//     marking does with the queue between Kmin and Kmax; the deeper the
//     excess, the deeper the queue: Kmin at m = 0, Kmax at m = ½ (2:1
//     oversubscribed).
//   - Beyond 2:1 (an incast of many senders, more than the marking can
//     rein in within a round trip), the queue grows from Kmax towards the
//     port's share of the buffer, reached as m → 1.
//
// The thresholds scale with the port's speed (per 100 Gb/s: Kmin 100 KB,
// Kmax 400 KB, buffer 2 MB; as a RoCE profile might set them, not a
// measurement), so a queue's delay at each threshold is the same at any
// speed (8, 32 and 160 µs). Bursts, PFC pauses and the transient while
// DCQCN converges are not modelled: the depths are steady-state figures
// for the current rates.
const (
	queueKminPer100G   = 100_000
	queueKmaxPer100G   = 400_000
	queueBufferPer100G = 2_000_000
)

// saturated is how close to its capacity a port sends when it is a
// bottleneck (max-min fair rates fill it up to rounding).
const saturated = 1 - 1e-6

// queueBytes is the steady-state depth, bytes, of the egress queue of a
// port of gbps that sends sentBps of flows flows and is offered
// offeredBps.
func queueBytes(gbps, sentBps, offeredBps float64, flows int) float64 {
	capacity := gbps * 1e9
	if capacity <= 0 || sentBps <= 0 || flows <= 0 {
		return 0
	}
	scale := gbps / 100
	kmin, kmax, buffer := queueKminPer100G*scale, queueKmaxPer100G*scale, queueBufferPer100G*scale
	if rho := sentBps / capacity; rho < saturated || offeredBps <= capacity*(1+1e-9) {
		rho = min(rho, 0.99)
		n := float64(flows)
		return min(rho*rho/(2*(1-rho))*packetBytes*(n-1)/n, kmin)
	}
	m := (offeredBps - capacity) / offeredBps
	if m <= 0.5 {
		return kmin + (kmax-kmin)*2*m
	}
	return kmax + (buffer-kmax)*(2*m-1)
}

// setQueuesLocked sets every egress port's queue depth from what it is
// offered and by how many flows (ports not in offered have none), and
// keeps each port's highest depth since its counters were last
// published.
func (f *Fabric) setQueuesLocked(offered map[models.Endpoint]float64, flows map[models.Endpoint]int) {
	for e, c := range f.queued {
		if _, still := offered[e]; !still {
			c.queueBytes = 0
			delete(f.queued, e)
		}
	}
	for e, o := range offered {
		c := f.counters[e]
		if c == nil {
			continue
		}
		sent := 0.0
		if r := f.portRate[e]; r != nil {
			sent = r.outBps
		}
		c.queueBytes = queueBytes(f.snap.PortGbps(e), sent, o, flows[e])
		c.queueMaxBytes = max(c.queueMaxBytes, c.queueBytes)
		f.queued[e] = c
	}
}

// QueueBytes is a port's egress queue depth now, bytes (see queueBytes).
func (f *Fabric) QueueBytes(e models.Endpoint) float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.counters[e]; c != nil {
		return c.queueBytes
	}
	return 0
}
