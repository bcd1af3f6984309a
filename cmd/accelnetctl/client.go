package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

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
	server string
	// from says where server came from, for a hint when it cannot be reached.
	from  string
	token string
	http  *http.Client
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
		c.server, c.from, err)
}

// APIError is a problem document the server answered with.
type APIError struct {
	Status int    `json:"status"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
	Errors []struct {
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"errors"`
	Bottleneck string   `json:"bottleneck"`
	FreeGbps   *float64 `json:"free_gbps"`
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP %d %s", e.Status, e.Title)
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	for _, f := range e.Errors {
		fmt.Fprintf(&b, "\n  %s: %s", f.Field, f.Message)
	}
	if e.Bottleneck != "" && e.FreeGbps != nil {
		fmt.Fprintf(&b, "\n  bottleneck %s, %.1f Gb/s free", e.Bottleneck, *e.FreeGbps)
	}
	return b.String()
}

// do sends body as JSON and decodes a 2xx answer into out; other answers
// become an *APIError.
func (c *client) do(ctx context.Context, method, path string, body, out any, headers ...string) (http.Header, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.server, "/")+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] != "" {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.unreachable(fmt.Errorf("%s %s: %w", method, path, err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.Header, err
	}
	if resp.StatusCode >= 300 {
		e := &APIError{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode)}
		if json.Unmarshal(data, e) != nil || e.Status == 0 {
			e.Status, e.Detail = resp.StatusCode, strings.TrimSpace(string(data))
		}
		return resp.Header, e
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.Header, fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	return resp.Header, nil
}

// stream reads server-sent events from path and calls fn with each
// event's name and data until ctx ends or the server closes the stream.
func (c *client) stream(ctx context.Context, path string, fn func(event, data string) error) error {
	req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimRight(c.server, "/")+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	hc := *c.http
	hc.Timeout = 0 // a watch runs until stopped
	resp, err := hc.Do(req)
	if err != nil {
		return c.unreachable(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		e := &APIError{Status: resp.StatusCode}
		_ = json.Unmarshal(data, e)
		return e
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	event, data := "", ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data != "" {
				if err := fn(event, data); err != nil {
					return err
				}
			}
			event, data = "", ""
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data += strings.TrimPrefix(line, "data: ")
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return sc.Err()
}

func newHTTPClient() *http.Client { return &http.Client{Timeout: 30 * time.Second} }
