package southbound_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	gnmipb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"

	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/pki"
	"github.com/accelnet/accelnet/internal/proctest"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound"
)

// gnxiStartup is gnmi_target's startup configuration: three interfaces
// with operational state, eth3 down. gnxi serves only what its tree holds,
// so the counters a switch would keep are written here.
const gnxiStartup = `{
  "openconfig-interfaces:interfaces": {"interface": [
    {"name": "eth1", "config": {"name": "eth1", "mtu": 1500, "enabled": true, "description": "to spine1"},
     "state": {"name": "eth1", "oper-status": "UP", "counters": {"in-octets": "1000", "out-octets": "2000", "out-discards": "3"}}},
    {"name": "eth2", "config": {"name": "eth2", "mtu": 1500, "enabled": true},
     "state": {"name": "eth2", "oper-status": "UP", "counters": {"in-octets": "10", "out-octets": "20", "out-discards": "0"}}},
    {"name": "eth3", "config": {"name": "eth3", "mtu": 9000, "enabled": false},
     "state": {"name": "eth3", "oper-status": "DOWN", "counters": {"in-octets": "0", "out-octets": "0", "out-discards": "0"}}}
  ]}
}`

// TestGNXITarget runs accelnet's gNMI client against gnxi's gnmi_target, a
// target nobody here wrote (built from tools/gnxi), over mutual TLS. It serves JSON and
// JSON_IETF only, SAMPLE only, no interval under 1 s, no OpenConfig QoS,
// and Get of type ALL only without wildcards: the client has to negotiate
// down to what it serves and still see counters, a link going down, and
// the configuration it pushes.
func TestGNXITarget(t *testing.T) {
	if testing.Short() {
		t.Skip("builds gnxi's gnmi_target")
	}
	bin := proctest.Tool(t, filepath.Join("..", "tools", "gnxi"), "github.com/google/gnxi/gnmi_target")
	cfg := filepath.Join(t.TempDir(), "startup.json")
	if err := os.WriteFile(cfg, []byte(gnxiStartup), 0o600); err != nil {
		t.Fatal(err)
	}
	// Over mutual TLS, as a production switch would be reached: gnxi
	// requires a client certificate from the CA it is given.
	certs := fabrictest.NewCerts(t)
	addr := fabrictest.FreeAddr(t)
	proctest.Start(t, "gnmi_target", bin, "-bind_address", addr, "-config", cfg,
		"-ca", certs.CA, "-cert", certs.ServerCert, "-key", certs.ServerKey)
	tlsCfg, err := pki.Files{CA: certs.CA, Cert: certs.ClientCert, Key: certs.ClientKey}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	dialer := &southbound.Dialer{TLS: tlsCfg}
	cc, err := grpc.NewClient(addr, dialer.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	gnmi := gnmipb.NewGNMIClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	proctest.Wait(t, 30*time.Second, "gnmi_target to serve", func() error {
		_, err := gnmi.Capabilities(ctx, &gnmipb.CapabilityRequest{})
		return err
	})
	sw := models.Switch{Name: "leaf1", GNMIAddr: addr}

	t.Run("no client certificate", func(t *testing.T) {
		noCert, err := pki.Files{CA: certs.CA}.ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		g := &southbound.GNMIConfig{Resolve: func(models.SwitchID) (models.Switch, error) { return sw, nil }, Dialer: &southbound.Dialer{TLS: noCert}}
		defer g.Close()
		if _, err := g.GetConfig(ctx, sw.Name); !errors.Is(err, southbound.ErrUnavailable) {
			t.Errorf("get config without a client certificate: %v, want unavailable", err)
		}
	})

	t.Run("telemetry", func(t *testing.T) {
		var mu sync.Mutex
		latest := map[uint32]models.CounterSample{} // by port, the fields merged
		synced := make(chan struct{}, 1)
		subCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- southbound.SubscribeCounters(subCtx, dialer, sw, 100*time.Millisecond, func(s models.CounterSample) {
				mu.Lock()
				defer mu.Unlock()
				l := latest[s.Port]
				l.Has |= s.Has
				switch s.Has {
				case models.HasInOctets:
					l.InOctets = s.InOctets
				case models.HasOutOctets:
					l.OutOctets = s.OutOctets
				case models.HasOutDiscards:
					l.OutDiscards = s.OutDiscards
				case models.HasOperStatus:
					l.OperUp = s.OperUp
				}
				latest[s.Port] = l
			}, func() {
				select {
				case synced <- struct{}{}:
				default:
				}
			})
		}()
		defer func() {
			stop()
			if err := <-done; err != context.Canceled && !t.Failed() {
				t.Errorf("SubscribeCounters ended with %v, want context.Canceled", err)
			}
		}()
		select {
		case <-synced:
		case err := <-done:
			done <- err // for the deferred check
			t.Fatalf("the subscription ended before sync_response: %v", err)
		case <-ctx.Done():
			t.Fatal("no sync_response")
		}
		all := models.HasInOctets | models.HasOutOctets | models.HasOutDiscards | models.HasOperStatus
		want := map[uint32]models.CounterSample{
			1: {InOctets: 1000, OutOctets: 2000, OutDiscards: 3, OperUp: true, Has: all},
			2: {InOctets: 10, OutOctets: 20, OperUp: true, Has: all},
			3: {Has: all},
		}
		check := func(want map[uint32]models.CounterSample) func() error {
			return func() error {
				mu.Lock()
				defer mu.Unlock()
				for port, w := range want {
					g := latest[port]
					if g.InOctets != w.InOctets || g.OutOctets != w.OutOctets || g.OutDiscards != w.OutDiscards || g.OperUp != w.OperUp || g.Has != w.Has {
						return fmt.Errorf("eth%d: got %+v, want %+v", port, g, w)
					}
				}
				return nil
			}
		}
		proctest.Wait(t, 10*time.Second, "samples of every interface", check(want))

		// eth2 goes down and eth1 moves traffic: gnxi's state is what a
		// Set writes, so the test plays the switch.
		_, err := gnmi.Set(ctx, &gnmipb.SetRequest{Update: []*gnmipb.Update{
			{Path: statePath("eth2", "oper-status"), Val: &gnmipb.TypedValue{Value: &gnmipb.TypedValue_StringVal{StringVal: "DOWN"}}},
			{Path: statePath("eth1", "counters", "in-octets"), Val: &gnmipb.TypedValue{Value: &gnmipb.TypedValue_StringVal{StringVal: "5000000"}}}, // gnxi keeps IETF JSON, where a uint64 is a string
		}})
		if err != nil {
			t.Fatalf("set gnxi state: %v", err)
		}
		want[1] = models.CounterSample{InOctets: 5_000_000, OutOctets: 2000, OutDiscards: 3, OperUp: true, Has: all}
		want[2] = models.CounterSample{InOctets: 10, OutOctets: 20, Has: all}
		proctest.Wait(t, 10*time.Second, "eth2 down and eth1's new counter in the samples", check(want))
	})

	t.Run("config", func(t *testing.T) {
		g := &southbound.GNMIConfig{
			Resolve: func(models.SwitchID) (models.Switch, error) { return sw, nil },
			Dialer:  dialer,
		}
		defer g.Close()
		g.SetElectionID(7)
		got, err := g.GetConfig(ctx, sw.Name)
		if err != nil {
			t.Fatalf("get config: %v", err)
		}
		want := map[uint32]models.InterfaceConfig{
			1: {MTU: 1500, Enabled: true, Description: "to spine1"},
			2: {MTU: 1500, Enabled: true},
			3: {MTU: 9000},
		}
		if !maps.Equal(got, want) {
			t.Fatalf("startup config read as %+v, want %+v", got, want)
		}
		push := map[uint32]models.InterfaceConfig{
			1: {MTU: 4200, Enabled: true, Description: "accelnet: leaf1 to spine1"},
			3: {MTU: 4200, Enabled: true, Description: "accelnet: leaf1 to spine2"},
		}
		if err := g.SetConfig(ctx, sw.Name, push); err != nil {
			t.Fatalf("set config: %v", err)
		}
		want[1], want[3] = push[1], push[3]
		if got, err = g.GetConfig(ctx, sw.Name); err != nil || !maps.Equal(got, want) {
			t.Fatalf("after set, config read as %+v (%v), want %+v", got, err, want)
		}
	})
}

// statePath is /interfaces/interface[name]/state/elems...
func statePath(name string, elems ...string) *gnmipb.Path {
	p := &gnmipb.Path{Elem: []*gnmipb.PathElem{{Name: "interfaces"}, {Name: "interface", Key: map[string]string{"name": name}}, {Name: "state"}}}
	for _, e := range elems {
		p.Elem = append(p.Elem, &gnmipb.PathElem{Name: e})
	}
	return p
}
