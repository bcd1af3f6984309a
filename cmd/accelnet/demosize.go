package main

import (
	"fmt"
	"log/slog"
	"math/bits"
	"strings"
	"time"

	"github.com/accelnet/accelnet/models"
)

// The demo runs the emulated fabric, etcd and the controller in one
// process. The defaults suit a fabric of a few hundred switches (a k=16
// fat-tree: 320); a larger one on two cores needs what a deployment of
// that size sets (docs/scaling.md, "What to set on a large fabric"), and
// the emulator's share of the machine kept in bounds: the demo picks
// those for the flags left at their defaults and says what it chose.

// demoTier is what a size of emulated fabric runs with.
type demoTier struct {
	// above: the tier applies to fabrics of more switches than this.
	above     int
	workers   int
	telemetry time.Duration // also the emulated switches' counter interval
	discovery time.Duration
	election  time.Duration
}

var demoTiers = []demoTier{
	// k=32 (1,280 switches). One replica: a longer lease loses nothing
	// (no other replica waits to take over), and a process this busy
	// renews a 2 s one late.
	{above: 512, workers: 64, telemetry: 5 * time.Second, discovery: 15 * time.Second, election: 10 * time.Second},
	// k=48 (2,880 switches).
	{above: 2048, workers: 64, telemetry: 20 * time.Second, discovery: 30 * time.Second, election: 10 * time.Second},
}

// sampleHosts is how many hosts the default sampling rate (1 in
// DefaultSampleOneIn) suits: the samples a second the controller and the
// emulator take in are kept at those of that many hosts at line rate.
const sampleHosts = 1024

// DefaultSampleOneIn is --sample-one-in's default.
const DefaultSampleOneIn = 65536

// sizeDemo sets, for an emulated fabric t larger than the defaults
// suit, what set (the flags given) leaves at its default, and returns
// what it chose, for the log; nothing for a fabric the defaults suit.
func (c *Config) sizeDemo(t models.Topology, set func(flag string) bool) []string {
	if set == nil {
		set = func(string) bool { return false }
	}
	var tier *demoTier
	for i := range demoTiers {
		if len(t.Switches) > demoTiers[i].above {
			tier = &demoTiers[i]
		}
	}
	var chose []string
	if tier != nil {
		if !set("workers") {
			c.Workers = tier.workers
			chose = append(chose, fmt.Sprintf("--workers %d", tier.workers))
		}
		if !set("telemetry-interval") {
			c.TelemetryInterval = tier.telemetry
			chose = append(chose, "--telemetry-interval "+tier.telemetry.String())
		}
		if !set("discovery-interval") && c.DiscoveryInterval > 0 {
			c.DiscoveryInterval = tier.discovery
			chose = append(chose, "--discovery-interval "+tier.discovery.String())
		}
		if tier.election > 0 && !set("election-ttl") {
			c.ElectionTTL = tier.election
			chose = append(chose, "--election-ttl "+tier.election.String())
		}
		// The emulated switches' counters advance as often as they are
		// sampled.
		c.CounterInterval = c.TelemetryInterval
	}
	switch hosts := len(t.Hosts); {
	case set("sample-one-in") || c.Elephants.SampleOneIn == 0:
	case tier != nil:
		// Thousands of detected elephants placed together every second,
		// their samples and pin counters, do not fit two cores beside
		// the emulated fabric (a k=32 permutation is 8,192 of them): the
		// demo runs the workload on ECMP (--intents declares it).
		c.Elephants.SampleOneIn = 0
		chose = append(chose, "--sample-one-in 0")
	case hosts > sampleHosts:
		scale := uint32(1) << bits.Len32(uint32((hosts-1)/sampleHosts)) // the next power of two
		c.Elephants.SampleOneIn *= scale
		chose = append(chose, fmt.Sprintf("--sample-one-in %d", c.Elephants.SampleOneIn))
	}
	return chose
}

// logSizing says what sizeDemo chose, if anything.
func logSizing(log *slog.Logger, t models.Topology, chose []string) {
	if len(chose) == 0 {
		return
	}
	log.Info("a large emulated fabric: the demo runs it as a deployment of its size would (flags given win)",
		"switches", len(t.Switches), "hosts", len(t.Hosts), "chose", strings.Join(chose, " "))
}
