package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/accelnet/accelnet/controller"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/spf13/pflag"
)

// TestConfigPrecedence: the command line beats the environment, which
// beats the file, which beats the defaults; lists work in all three.
func TestConfigPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "accelnet.yaml")
	if err := os.WriteFile(file, []byte("http-addr: \":9000\"\netcd-endpoints: [a:2379, b:2379]\nheadroom: 0.2\npending-timeout: 2m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var addr string
	var eps []string
	var headroom float64
	var pending time.Duration
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.StringVar(&addr, "http-addr", ":8080", "")
	fs.StringSliceVar(&eps, "etcd-endpoints", nil, "")
	fs.Float64Var(&headroom, "headroom", 0.05, "")
	fs.DurationVar(&pending, "pending-timeout", time.Minute, "")
	if err := fs.Parse([]string{"--http-addr", ":7000"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"ACCELNET_HEADROOM": "0.3"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if err := applyConfig(fs, file, lookup); err != nil {
		t.Fatal(err)
	}
	if addr != ":7000" || headroom != 0.3 || strings.Join(eps, ",") != "a:2379,b:2379" || pending != 2*time.Minute {
		t.Errorf("got http-addr %q headroom %v etcd-endpoints %v pending-timeout %v; want :7000 (flag), 0.3 (env), [a:2379 b:2379] and 2m (file)", addr, headroom, eps, pending)
	}
}

// TestConfigErrors: an unknown key or a bad value is refused with a
// message naming it.
func TestConfigErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		file, env, want string
	}{
		"unknown key":    {file: "htp-addr: x\n", want: `"htp-addr" is not a flag`},
		"bad file value": {file: "headroom: lots\n", want: "headroom"},
		"bad env value":  {env: "nope", want: "ACCELNET_HEADROOM"},
		"malformed YAML": {file: "headroom: [\n", want: "--config"},
		"missing file":   {want: "--config"},
	} {
		t.Run(name, func(t *testing.T) {
			var headroom float64
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			fs.Float64Var(&headroom, "headroom", 0.05, "")
			file := filepath.Join(t.TempDir(), "c.yaml")
			if tc.file != "" {
				if err := os.WriteFile(file, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			lookup := func(k string) (string, bool) { return tc.env, tc.env != "" && k == "ACCELNET_HEADROOM" }
			err := applyConfig(fs, file, lookup)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("want an error naming %q, got %v", tc.want, err)
			}
		})
	}
}

// TestServeHelpDocumentsConfiguration: `accelnet serve --help` tells an
// operator where settings come from and lists the TLS and HA flags.
func TestServeHelpDocumentsConfiguration(t *testing.T) {
	root := newRootCommand()
	var out strings.Builder
	root.SetOut(&out)
	root.SetArgs([]string{"serve", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ACCELNET_", "--config", "--tls-cert", "--tls-client-ca", "--southbound-tls-ca", "--election-ttl", "--advertise-url", "--foreign-entries"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("serve --help does not mention %s", want)
		}
	}
}

// TestStackConfigCarriesTheSettings: what the flags set reaches the stack
// (--congestion-interval once did not, and weights never moved).
func TestStackConfigCarriesTheSettings(t *testing.T) {
	cfg := defaultConfig()
	if o := cfg.stackConfig(false, nil); o.CongestionInterval != 5*time.Second || o.Elephants.SampleOneIn != 65536 || o.Elephants.Gbps != 10 || o.DiscoveryInterval != stack.DefaultDiscoveryInterval || o.LivenessInterval != controller.DefaultLivenessInterval {
		t.Errorf("defaults reach the stack as congestion %v, sampling 1/%d, elephants %v Gb/s", o.CongestionInterval, o.Elephants.SampleOneIn, o.Elephants.Gbps)
	}
	cfg.CongestionInterval, cfg.Elephants.SampleOneIn, cfg.Elephants.Gbps, cfg.Intents.Headroom, cfg.DiscoveryInterval, cfg.LivenessInterval = 0, 0, 25, 0.2, 0, 0
	o := cfg.stackConfig(true, nil)
	if o.CongestionInterval != 0 || o.Elephants.SampleOneIn != 0 || o.Elephants.Gbps != 25 || o.Intents.Headroom != 0.2 || !o.Emulate || o.DiscoveryInterval != 0 || o.LivenessInterval != 0 { // 0: off, the same in the stack
		t.Errorf("set values reach the stack as %+v", o)
	}
}

// TestDemoListensOnLoopback: the demo binds loopback unless told
// otherwise (its /sim/v1 can take the fabric down); serve binds every
// interface; a given address wins, from the command line, the environment
// or the file.
func TestDemoListensOnLoopback(t *testing.T) {
	for _, tc := range []struct {
		name string
		demo bool
		args []string
		env  map[string]string
		want string
	}{
		{name: "demo", demo: true, want: "127.0.0.1:8080"},
		{name: "serve", want: ":8080"},
		{name: "demo, flag", demo: true, args: []string{"--http-addr", "0.0.0.0:9090"}, want: "0.0.0.0:9090"},
		{name: "demo, environment", demo: true, env: map[string]string{"ACCELNET_HTTP_ADDR": ":7070"}, want: ":7070"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaultConfig()
			fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
			fs.StringVar(&cfg.HTTPAddr, "http-addr", "", "")
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			if err := applyConfig(fs, "", lookup); err != nil {
				t.Fatal(err)
			}
			cfg.defaultHTTPAddr(fs, tc.demo)
			if cfg.HTTPAddr != tc.want {
				t.Fatalf("listens on %q, want %q", cfg.HTTPAddr, tc.want)
			}
		})
	}
}
