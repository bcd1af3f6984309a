package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/accelnet/accelnet/apiclient"
	"gopkg.in/yaml.v3"
)

// Context is one server and the token to use with it.
type Context struct {
	Server string `yaml:"server"`
	Token  string `yaml:"token"`
}

// File is the CLI's config file: named contexts and the current one.
type File struct {
	Current  string             `yaml:"current"`
	Contexts map[string]Context `yaml:"contexts"`
}

// configPath is $ACCELNET_CONFIG, else the user config dir's accelnet/config.yaml.
func configPath() (string, error) {
	if p := os.Getenv("ACCELNET_CONFIG"); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no config directory (set ACCELNET_CONFIG): %w", err)
	}
	return filepath.Join(dir, "accelnet", "config.yaml"), nil
}

func loadFile() (File, string, error) {
	path, err := configPath()
	if err != nil {
		return File{}, "", err
	}
	f := File{Contexts: map[string]Context{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return f, path, nil
	}
	if err != nil {
		return f, path, err
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		return f, path, fmt.Errorf("%s: %w", path, err)
	}
	if f.Contexts == nil {
		f.Contexts = map[string]Context{}
	}
	return f, path, nil
}

func saveFile(f File, path string) error {
	data, err := yaml.Marshal(f)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600) // it holds tokens
}

// client talks to one accelnet API.
type client struct {
	apiclient.Client
	// from says where Server came from, for a hint when it cannot be reached.
	from string
}

// unreachable explains a request that reached no server: which server,
// where that came from, and what to do.
func (c *client) unreachable(err error) error {
	var opErr *net.OpError
	var dnsErr *net.DNSError
	if !errors.As(err, &opErr) && !errors.As(err, &dnsErr) {
		return err
	}
	return fmt.Errorf("cannot reach the accelnet API at %s (%s): %w\n"+
		"  Is accelnet running there? Start one with: accelnet demo  (or: go run ./cmd/accelnet demo)\n"+
		"  Or use another server: --server URL, ACCELNET_SERVER, or accelnetctl config set-context NAME --server URL --token TOKEN --use",
		c.Server, c.from, err)
}

// do sends body as JSON and decodes a 2xx answer into out; other answers
// become an *apiclient.Error.
func (c *client) do(ctx context.Context, method, path string, body, out any, headers ...string) (http.Header, error) {
	return c.Do(ctx, method, path, body, out, headers...)
}

// stream reads server-sent events from path and calls fn with each
// event's name and data until ctx ends or the server closes the stream.
func (c *client) stream(ctx context.Context, path string, fn func(event, data string) error) error {
	return c.Stream(ctx, path, fn)
}

func newHTTPClient() *http.Client { return &http.Client{Timeout: 30 * time.Second} }
