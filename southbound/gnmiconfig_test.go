package southbound_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound"
	"github.com/accelnet/accelnet/southbound/p4"
	"github.com/accelnet/accelnet/topology"
)

// countingProxy forwards loopback TCP connections to target and counts
// them; cut closes every open one and refuses new ones until resume.
type countingProxy struct {
	t      *testing.T
	target string
	ln     net.Listener
	addr   string

	mu       sync.Mutex
	accepted int
	open     []net.Conn
}

func newCountingProxy(t *testing.T, target string) *countingProxy {
	p := &countingProxy{t: t, target: target}
	p.listen("127.0.0.1:0")
	t.Cleanup(p.cut)
	return p
}

func (p *countingProxy) listen(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.ln, p.addr = ln, ln.Addr().String()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", p.target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.accepted++
			p.open = append(p.open, in, out)
			p.mu.Unlock()
			go func() { io.Copy(out, in); out.Close() }()
			go func() { io.Copy(in, out); in.Close() }()
		}
	}()
}

func (p *countingProxy) connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

func (p *countingProxy) cut() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.open {
		c.Close()
	}
	p.open = nil
}

func (p *countingProxy) resume() { p.listen(p.addr) }

// proxiedLeaf starts a small fabric and returns its leaf1, reached (both
// protocols: fabricsim serves them on one port) through a counting
// proxy.
func proxiedLeaf(t *testing.T) (models.Switch, *countingProxy) {
	t.Helper()
	topo, err := topology.LeafSpine(1, 2, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	f := fabrictest.StartFabric(t, topo)
	sw, err := resolver(f.Topology())("leaf1")
	if err != nil {
		t.Fatal(err)
	}
	if sw.P4RTAddr != sw.GNMIAddr {
		t.Fatalf("fabricsim serves P4Runtime at %s and gNMI at %s, want one port", sw.P4RTAddr, sw.GNMIAddr)
	}
	proxy := newCountingProxy(t, sw.GNMIAddr)
	sw.P4RTAddr, sw.GNMIAddr = proxy.addr, proxy.addr
	return sw, proxy
}

// TestGNMIConfigKeepsOneConnection: reading and writing a switch's
// configuration and reading its LLDP neighbours, again and again, use one
// connection; once the switch cannot be reached a call fails, and the
// first call after it is back dials again and succeeds (no reconnect
// backoff to wait out).
func TestGNMIConfigKeepsOneConnection(t *testing.T) {
	sw, proxy := proxiedLeaf(t)
	g := &southbound.GNMIConfig{Resolve: func(id models.SwitchID) (models.Switch, error) {
		if id != sw.Name {
			return models.Switch{}, errors.New("unknown switch")
		}
		return sw, nil
	}}
	t.Cleanup(g.Close)
	ctx := context.Background()
	round := func(mtu uint16) error {
		if err := g.SetConfig(ctx, "leaf1", map[uint32]models.InterfaceConfig{1: {Enabled: true, MTU: mtu, Description: "to h1"}}); err != nil {
			return err
		}
		got, err := g.GetConfig(ctx, "leaf1")
		if err != nil {
			return err
		}
		if got[1].MTU != mtu {
			t.Fatalf("port 1 reads back MTU %d after setting %d", got[1].MTU, mtu)
		}
		nbs, err := g.LLDPNeighbors(ctx, "leaf1")
		if err != nil {
			return err
		}
		if len(nbs) == 0 {
			t.Fatal("no LLDP neighbours read")
		}
		return nil
	}
	for i := range 5 {
		if err := round(4000 + uint16(i)); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	if n := proxy.connections(); n != 1 {
		t.Fatalf("5 rounds of Set, Get and LLDP made %d connections, want 1", n)
	}

	proxy.cut()
	for range 3 { // gRPC's own reconnects would back off after each
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := g.GetConfig(cctx, "leaf1")
		cancel()
		if !errors.Is(err, southbound.ErrUnavailable) {
			t.Fatalf("the switch out of reach: GetConfig = %v, want ErrUnavailable", err)
		}
	}
	proxy.resume()
	if err := round(4100); err != nil {
		t.Fatalf("the first round after the switch is back: %v", err)
	}
	if n := proxy.connections(); n != 2 {
		t.Fatalf("%d connections after the switch came back, want 2", n)
	}
}

// TestProtocolsShareOneConnection: the P4Runtime driver, gNMI
// configuration and a counter subscription that share a Dialer reach a
// switch serving both protocols on one port over one connection, and a
// new election ID arbitrates again on it. Once the switch has been out of
// reach, each dials afresh and works at once (no reconnect backoff of the
// broken connection to wait out).
func TestProtocolsShareOneConnection(t *testing.T) {
	sw, proxy := proxiedLeaf(t)
	resolve := func(id models.SwitchID) (models.Switch, error) {
		if id != sw.Name {
			return models.Switch{}, errors.New("unknown switch")
		}
		return sw, nil
	}
	reg := prometheus.NewRegistry()
	dialer := &southbound.Dialer{Metrics: southbound.NewRPCMetrics(reg)}
	schema, err := p4.LoadSchema()
	if err != nil {
		t.Fatal(err)
	}
	d := southbound.NewP4RT(schema, southbound.P4RTOptions{Resolve: resolve, ElectionID: 1, Dialer: dialer})
	t.Cleanup(d.Close)
	g := &southbound.GNMIConfig{Resolve: resolve, Dialer: dialer}
	t.Cleanup(g.Close)
	ctx := context.Background()
	subscribe := func() (synced, done chan error, cancel func()) {
		sctx, cancel := context.WithCancel(ctx)
		synced, done = make(chan error, 1), make(chan error, 1)
		go func() {
			done <- dialer.SubscribeCounters(sctx, sw, 100*time.Millisecond, func(models.CounterSample) {}, func() { synced <- nil })
		}()
		return synced, done, cancel
	}
	waitSynced := func(synced, done chan error) {
		t.Helper()
		select {
		case <-synced:
		case err := <-done:
			t.Fatalf("the counter subscription ended before its sync_response: %v", err)
		case <-time.After(time.Minute):
			t.Fatal("no sync_response in a minute")
		}
	}
	every := func(what string) {
		t.Helper()
		if _, err := d.Read(ctx, "leaf1"); err != nil {
			t.Fatalf("%s: P4Runtime Read: %v", what, err)
		}
		if _, err := g.GetConfig(ctx, "leaf1"); err != nil {
			t.Fatalf("%s: gNMI GetConfig: %v", what, err)
		}
	}

	synced, done, cancel := subscribe()
	waitSynced(synced, done)
	every("first")
	d.SetElectionID(2) // a new term: arbitrated again
	every("after a new election ID")
	if n := proxy.connections(); n != 1 {
		t.Fatalf("P4Runtime, gNMI configuration and a subscription made %d connections, want 1", n)
	}
	// Calls on the one connection are still told apart by protocol.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != "accelnet_southbound_rpc_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			calls[l["protocol"]+" "+l["method"]] = true
		}
	}
	for _, want := range []string{"p4runtime Read", "gnmi Get", "gnmi Capabilities"} {
		if !calls[want] {
			t.Errorf("no %s call recorded; recorded: %v", want, calls)
		}
	}

	proxy.cut()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the subscription did not end in a minute with its switch out of reach")
	}
	cancel()
	for range 3 { // gRPC's own reconnects would back off after each
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, rerr := d.Read(cctx, "leaf1")
		_, gerr := g.GetConfig(cctx, "leaf1")
		cancel()
		if !errors.Is(rerr, southbound.ErrUnavailable) || !errors.Is(gerr, southbound.ErrUnavailable) {
			t.Fatalf("the switch out of reach: Read = %v, GetConfig = %v, want ErrUnavailable", rerr, gerr)
		}
	}
	proxy.resume()
	every("the first calls after the switch is back")
	synced, done, cancel = subscribe()
	defer cancel()
	waitSynced(synced, done)
	if n := proxy.connections(); n != 2 {
		t.Fatalf("%d connections after the switch came back, want 2", n)
	}
}
