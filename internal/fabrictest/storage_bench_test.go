package fabrictest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store"
	"github.com/accelnet/accelnet/topology"
)

// BenchmarkIntentStorage measures what intents cost etcd: b.N two-flow
// intents between hosts of different leaves are admitted and installed,
// then it reports the bytes of their keys and values (bytes_per_intent:
// what one intent holds in etcd's keyspace) and the growth of etcd's
// database file per intent before and after compaction and defrag
// (db_bytes_per_intent, db_bytes_per_intent_compacted: each status change
// is a revision of its key until compaction). Run:
//
//	go test ./internal/fabrictest -run '^$' -bench IntentStorage -benchtime 5000x
func BenchmarkIntentStorage(b *testing.B) {
	topo, err := topology.LeafSpine(4, 8, 8, 400)
	if err != nil {
		b.Fatal(err)
	}
	h := fabrictest.New(b, topo)
	h.Eventually(b, 30*time.Second, "fabric programmed", func() bool { return h.Converged() == nil })
	ctx := context.Background()
	ep := h.Embedded.Endpoints[0]
	status := func() int64 {
		st, err := h.Etcd.Status(ctx, ep)
		if err != nil {
			b.Fatal(err)
		}
		return st.DbSize
	}
	before := status()
	// Its one tenant may hold the whole flow-pin table.
	if _, err := h.Auth.PutTenant(ctx, models.Tenant{Name: "size", MaxPinsPerSwitch: 1 << 20}, nil); err != nil {
		b.Fatal(err)
	}
	snap, _ := h.Controller.Snapshot()
	hosts := snap.Hosts()
	specs := make([]models.IntentSpec, 0, b.N)
	for i := range b.N {
		src := hosts[i%len(hosts)]
		dst := hosts[(i+8)%len(hosts)] // the next leaf's host
		specs = append(specs, models.IntentSpec{Name: fmt.Sprintf("intent %d", i), Src: src.Name, Dst: dst.Name, Gbps: 0.01,
			SrcPorts: models.PortRange{First: uint16(1024 + 2*(i/len(hosts))), Last: uint16(1025 + 2*(i/len(hosts)))}})
	}
	b.ResetTimer()
	for i := 0; i < len(specs); i += 500 {
		if _, err := h.Intents.CreateBatch(ctx, "size", specs[i:min(i+500, len(specs))]); err != nil {
			b.Fatal(err)
		}
	}
	h.Eventually(b, 5*time.Minute, "every intent installed", func() bool {
		return h.Intents.Counts()[models.StateInstalled] == b.N
	})
	b.StopTimer()
	resp, err := h.Etcd.Get(ctx, store.KeyIntents, clientv3.WithPrefix())
	if err != nil {
		b.Fatal(err)
	}
	var kv int64
	for _, x := range resp.Kvs {
		kv += int64(len(x.Key) + len(x.Value))
	}
	grown := status() - before
	if _, err := h.Etcd.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		b.Fatal(err)
	}
	if _, err := h.Etcd.Defragment(ctx, ep); err != nil {
		b.Fatal(err)
	}
	compacted := status() - before
	n := float64(b.N)
	b.ReportMetric(float64(kv)/n, "bytes_per_intent")
	b.ReportMetric(float64(grown)/n, "db_bytes_per_intent")
	b.ReportMetric(float64(compacted)/n, "db_bytes_per_intent_compacted")
}
