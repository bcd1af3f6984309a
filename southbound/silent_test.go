package southbound_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound"
	"github.com/accelnet/accelnet/southbound/p4"
	"github.com/accelnet/accelnet/topology"
)

// TestSilentSwitchStallsNoOther: a switch that accepts TCP connections and
// never answers holds its own callers only. While a read of it hangs in
// connecting, reads and writes of the other switches go on (the driver
// must not hold its lock across a dial, arbitration or pipeline push).
func TestSilentSwitchStallsNoOther(t *testing.T) {
	topo, err := topology.LeafSpine(1, 2, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	f := fabrictest.StartFabric(t, topo)
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // accepted, never read or answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	live := f.Topology()
	resolve := resolver(live)
	schema, err := p4.LoadSchema()
	if err != nil {
		t.Fatal(err)
	}
	d := southbound.NewP4RT(schema, southbound.P4RTOptions{ElectionID: 1, Resolve: func(id models.SwitchID) (models.Switch, error) {
		sw, err := resolve(id)
		if id == "leaf1" {
			sw.P4RTAddr = silent.Addr().String()
		}
		return sw, err
	}})
	t.Cleanup(d.Close)

	ctx, cancel := context.WithCancel(context.Background())
	hung := make(chan error, 1)
	go func() {
		_, err := d.Read(ctx, "leaf1")
		hung <- err
	}()
	// The others, while leaf1's read is stuck (a backstop only fails).
	done := make(chan error, 1)
	go func() {
		for _, sw := range []models.SwitchID{"leaf2", "spine1"} {
			got, err := d.Read(context.Background(), sw)
			if err != nil {
				done <- err
				return
			}
			if err := d.Apply(context.Background(), sw, models.Compute(sampleState(), got)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case err := <-hung:
		t.Fatalf("the silent switch answered first: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("reads and writes of the other switches waited on the silent one")
	}
	select {
	case err := <-hung:
		t.Fatalf("the silent switch's read returned (%v) before it was cancelled", err)
	default:
	}
	cancel()
	if err := <-hung; err == nil {
		t.Fatal("a read of a silent switch succeeded")
	}
}
