package southbound_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound"
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

// TestGNMIConfigKeepsOneConnection: reading and writing a switch's
// configuration and reading its LLDP neighbours, again and again, use one
// connection; once the switch cannot be reached a call fails, and the
// first call after it is back dials again and succeeds (no reconnect
// backoff to wait out).
func TestGNMIConfigKeepsOneConnection(t *testing.T) {
	topo, err := topology.LeafSpine(1, 2, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	f := fabrictest.StartFabric(t, topo)
	sw, err := resolver(f.Topology())("leaf1")
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCountingProxy(t, sw.GNMIAddr)
	sw.GNMIAddr = proxy.addr
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
		_, err = g.GetConfig(cctx, "leaf1")
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
