package fabricsim

import (
	"github.com/accelnet/accelnet/models"
)

// The egress queue model. fabricsim's dataplane is flow-level: rates are
// max-min fair and nothing is a packet, so a queue's depth is what that
// steady state implies, per egress port, from what it sends (s) against
// what it can send (c), and what can arrive: from each ingress port that
// feeds it, what the senders offer through it (their demands before
// congestion control), no more than that ingress's capacity (o in all,
// over n ingress ports):
//
//   - Nothing can arrive beyond c: the queue n streams build at
//     utilization ρ = s/c. One stream builds none (its packets come no
//     faster than the port sends them: a spine port fed by one uplink,
//     or one paced flow); as streams multiply it tends to an M/D/1
//     server's mean of ρ²/(2(1−ρ)) packets: that times (n−1)/n, with ρ
//     at most 0.99, and no deeper than the ECN marking threshold Kmin
//     (from there on ECN holds it). Idle ports have none; a port at 90%
//     of many streams about four packets.
//   - More can arrive than c (o > c) and the port is full (s = c):
//     DCQCN's steady state. ECN marks the excess fraction m = (o−c)/o of
//     what the port sends, which RED-style marking does with the queue
//     between Kmin and Kmax; the deeper the excess, the deeper the queue:
//     Kmin at m = 0, Kmax at m = ½ (2:1).
//   - Beyond 2:1 (an incast of many senders, more than the marking can
//     rein in within a round trip), the queue grows from Kmax towards the
//     port's share of the buffer, reached as m → 1.
//
// The thresholds scale with the port's speed (per 100 Gb/s: Kmin 100 KB,
// Kmax 400 KB, buffer 2 MB; as a RoCE profile might set them, not a
// measurement), so a queue's delay at each threshold is the same at any
// speed (8, 32 and 160 µs). Bursts, PFC pauses and the transient while
// DCQCN converges are not modelled: the depths are steady-state figures
// for the current rates. (The ECN marks use the senders' offer through a
// port without the ingress cap: a port downstream of a full one marks
// as if the excess reached it.)
const (
	queueKminPer100G   = 100_000
	queueKmaxPer100G   = 400_000
	queueBufferPer100G = 2_000_000
)

// saturated is how close to its capacity a port sends when it is a
// bottleneck (max-min fair rates fill it up to rounding).
const saturated = 1 - 1e-6

// queueBytes is the steady-state depth, bytes, of the egress queue of a
// port of gbps that sends sentBps, fed by streams ingress ports that can
// bring it offeredBps.
func queueBytes(gbps, sentBps, offeredBps float64, streams int) float64 {
	capacity := gbps * 1e9
	if capacity <= 0 || sentBps <= 0 || streams <= 0 {
		return 0
	}
	scale := gbps / 100
	kmin, kmax, buffer := queueKminPer100G*scale, queueKmaxPer100G*scale, queueBufferPer100G*scale
	if rho := sentBps / capacity; rho < saturated || offeredBps <= capacity*(1+1e-9) {
		rho = min(rho, 0.99)
		n := float64(streams)
		return min(rho*rho/(2*(1-rho))*packetBytes*(n-1)/n, kmin)
	}
	m := (offeredBps - capacity) / offeredBps
	if m <= 0.5 {
		return kmin + (kmax-kmin)*2*m
	}
	return kmax + (buffer-kmax)*(2*m-1)
}

// portPair is an ingress and an egress port of one switch.
type portPair struct{ in, out models.Endpoint }

// egressOffer is what the senders offer an egress port, bit/s: in all
// (offered, what ECN marks by), and as its ingress ports can bring it,
// each no more than its capacity (arrivable, what its queue builds by),
// over streams ingress ports.
type egressOffer struct {
	offered, arrivable float64
	streams            int
}

// egressOffers sums the senders' offer from each ingress to each egress
// port (arriving) per egress port.
func (f *Fabric) egressOffers(arriving map[portPair]float64) map[models.Endpoint]*egressOffer {
	out := map[models.Endpoint]*egressOffer{}
	for p, bps := range arriving {
		o := out[p.out]
		if o == nil {
			o = &egressOffer{}
			out[p.out] = o
		}
		o.offered += bps
		o.arrivable += min(bps, f.snap.PortGbps(p.in)*1e9)
		o.streams++
	}
	return out
}

// setQueuesLocked sets every egress port's queue depth from its offer
// (ports not in offers have none), and keeps each port's highest depth
// since its counters were last published.
func (f *Fabric) setQueuesLocked(offers map[models.Endpoint]*egressOffer) {
	for e, c := range f.queued {
		if _, still := offers[e]; !still {
			c.queueBytes = 0
			delete(f.queued, e)
		}
	}
	for e, o := range offers {
		c := f.counters[e]
		if c == nil {
			continue
		}
		sent := 0.0
		if r := f.portRate[e]; r != nil {
			sent = r.outBps
		}
		c.queueBytes = queueBytes(f.snap.PortGbps(e), sent, o.arrivable, o.streams)
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
