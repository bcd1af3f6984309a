package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/accelnet/accelnet/controller"
	"github.com/accelnet/accelnet/models"
)

// fabricOf is a topology of switches and hosts alone (what sizeDemo
// counts).
func fabricOf(switches, hosts int) models.Topology {
	var t models.Topology
	for i := range switches {
		t.Switches = append(t.Switches, models.Switch{Name: models.SwitchID(fmt.Sprintf("s%d", i))})
	}
	for i := range hosts {
		t.Hosts = append(t.Hosts, models.Host{Name: fmt.Sprintf("h%d", i)})
	}
	return t
}

// TestDemoSizedToItsFabric: a k=16-sized fabric runs with the defaults;
// a k=32-sized and a k=48-sized one with what a deployment of that size
// sets and sampling off, each said; flags given win; a fabric of many
// hosts and few switches samples at a rate scaled to its hosts.
func TestDemoSizedToItsFabric(t *testing.T) {
	none := func(string) bool { return false }
	small := defaultConfig()
	if chose := small.sizeDemo(fabricOf(320, 1024), none); len(chose) != 0 || small.Workers != controller.DefaultWorkers || small.Elephants.SampleOneIn != DefaultSampleOneIn {
		t.Errorf("k=16: chose %v, workers %d, sampling 1/%d; want the defaults", chose, small.Workers, small.Elephants.SampleOneIn)
	}
	k32 := defaultConfig()
	chose := k32.sizeDemo(fabricOf(1280, 8192), none)
	if k32.Workers != 64 || k32.TelemetryInterval != 5*time.Second || k32.CounterInterval != 5*time.Second || k32.ElectionTTL != 10*time.Second || k32.Elephants.SampleOneIn != 0 || len(chose) != 5 {
		t.Errorf("k=32: chose %v; workers %d, telemetry %s, counters %s, lease %s, sampling 1/%d", chose, k32.Workers, k32.TelemetryInterval, k32.CounterInterval, k32.ElectionTTL, k32.Elephants.SampleOneIn)
	}
	k48 := defaultConfig()
	k48.sizeDemo(fabricOf(2880, 27648), none)
	if k48.TelemetryInterval != 20*time.Second || k48.DiscoveryInterval != 30*time.Second {
		t.Errorf("k=48: telemetry %s, discovery %s; want 20s and 30s", k48.TelemetryInterval, k48.DiscoveryInterval)
	}
	given := defaultConfig()
	given.Workers, given.Elephants.SampleOneIn = 8, 4096
	chose = given.sizeDemo(fabricOf(1280, 8192), func(f string) bool { return f == "workers" || f == "sample-one-in" })
	if given.Workers != 8 || given.Elephants.SampleOneIn != 4096 {
		t.Errorf("flags given: workers %d, sampling 1/%d (chose %v); want them as given", given.Workers, given.Elephants.SampleOneIn, chose)
	}
	wide := defaultConfig()
	wide.sizeDemo(fabricOf(100, 3000), none)
	if wide.Elephants.SampleOneIn != 4*DefaultSampleOneIn {
		t.Errorf("3,000 hosts on 100 switches: sampling 1/%d, want 1/%d", wide.Elephants.SampleOneIn, 4*DefaultSampleOneIn)
	}
}
