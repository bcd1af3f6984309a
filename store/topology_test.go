package store

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/accelnet/accelnet/topology"
)

// TestLargeTopologyStoredInParts: a k=32 fat-tree (2.3 MB of JSON, over
// etcd's 1.5 MiB request limit as one key: `accelnet demo --topology
// fattree:32` could not start) is stored in parts under the limit, in
// transactions under etcd's default limits, and read back whole. A change
// to one link writes one part and the head; the topology as it was stays
// readable at its revision; a topology stored whole by an earlier version
// is still read.
func TestLargeTopologyStoredInParts(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	topo, err := topology.FatTree(32, 400)
	if err != nil {
		t.Fatal(err)
	}
	whole, _ := json.Marshal(topo)
	if len(whole) < 2<<20 {
		t.Fatalf("the k=32 fat-tree is %d bytes: not the case this test is for", len(whole))
	}
	rev, err := s.PutTopology(ctx, topo, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, mod, _, err := s.Topology(ctx)
	if err != nil || mod != rev || !reflect.DeepEqual(got, topo) {
		t.Fatalf("read back: %v, mod revision %d (wrote %d), equal %v", err, mod, rev, reflect.DeepEqual(got, topo))
	}
	sizes := func() map[string]int {
		resp, err := s.cli.Get(ctx, Prefix, clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, kv := range resp.Kvs {
			out[string(kv.Key)] = len(kv.Value)
		}
		return out
	}
	before := sizes()
	for k, n := range before {
		if n > maxPartBytes+4096 {
			t.Errorf("%s holds %d bytes", k, n)
		}
	}

	changed := topo
	changed.Links = append(changed.Links[:0:0], topo.Links...)
	changed.Links[len(changed.Links)/2].Gbps = 100
	rev2, err := s.PutTopology(ctx, changed, rev)
	if err != nil {
		t.Fatal(err)
	}
	after := sizes()
	written := 0
	for k := range after {
		if _, ok := before[k]; !ok {
			written++
		}
	}
	if written != 1 || len(after) != len(before) {
		t.Errorf("one link changed: %d new parts (want 1), %d keys before and %d after", written, len(before), len(after))
	}
	if got, _, _, err := s.Topology(ctx); err != nil || got.Links[len(got.Links)/2].Gbps != 100 {
		t.Fatalf("after the change: %v", err)
	}
	if old, _, _, err := s.TopologyAt(ctx, rev); err != nil || !reflect.DeepEqual(old, topo) {
		t.Fatalf("the topology at its old revision: %v", err)
	}
	if _, err := s.PutTopology(ctx, topo, rev); err != ErrConflict {
		t.Fatalf("a write expecting the old head: %v, want ErrConflict", err)
	}
	_ = rev2

	small, _ := topology.LeafSpine(2, 2, 1, 100)
	legacy, _ := json.Marshal(small)
	if _, err := s.cli.Put(ctx, KeyTopology, string(legacy)); err != nil {
		t.Fatal(err)
	}
	if got, _, _, err := s.Topology(ctx); err != nil || !reflect.DeepEqual(got, small) {
		t.Fatalf("a topology stored whole: %v", err)
	}
	if !strings.HasPrefix(KeyTopologyParts, Prefix) || strings.HasPrefix(KeyTopologyParts, KeyTopology) {
		t.Fatal("parts must not be under the head's prefix (its followers would see every part)")
	}
}
