// Package topotest builds topology snapshots for tests: the fabric
// builders' snapshots of 100 Gb/s links, failing the test on an error.
package topotest

import (
	"testing"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// LeafSpine is topology.LeafSpine's fabric of 100 Gb/s links, as a
// snapshot.
func LeafSpine(tb testing.TB, spines, leaves, hostsPerLeaf int) *topology.Snapshot {
	tb.Helper()
	topo, err := topology.LeafSpine(spines, leaves, hostsPerLeaf, 100)
	return snapshot(tb, topo, err)
}

// FatTree is topology.FatTree's k-ary fat-tree of 100 Gb/s links, as a
// snapshot.
func FatTree(tb testing.TB, k int) *topology.Snapshot {
	tb.Helper()
	topo, err := topology.FatTree(k, 100)
	return snapshot(tb, topo, err)
}

func snapshot(tb testing.TB, topo models.Topology, err error) *topology.Snapshot {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
	snap, err := topology.New(topo)
	if err != nil {
		tb.Fatal(err)
	}
	return snap
}
