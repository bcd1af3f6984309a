// Package apiclient is a client of accelnet's REST API: JSON requests with
// a bearer token, answers decoded or returned as the problem document the
// server sent, and server-sent event streams. accelnetctl and the
// Kubernetes side (package kube) reach accelnet only through it.
package apiclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/accelnet/accelnet/api"
)

// Client talks to one accelnet API.
type Client struct {
	// Server is the API's base URL (http://localhost:8080).
	Server string
	// Token is the bearer token sent with every request ("" for none).
	Token string
	// HTTP sends the requests; nil is a client with a 30 s timeout. A
	// stream has no timeout: it runs until its context ends.
	HTTP *http.Client
	// Unreachable, if set, wraps the error of a request that reached no
	// server (to say which server, and what to do).
	Unreachable func(error) error
}

// maxAnswer bounds what an answer may hold (a k=48 topology is a few MB).
const maxAnswer = 64 << 20

// Error is a problem document the server answered with (RFC 9457).
type Error struct {
	api.Problem
}

func (e *Error) Error() string {
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

// StatusOf is the HTTP status of the *Error in err's chain, else 0.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Timeout: 30 * time.Second}
}

func (c *Client) unreachable(err error) error {
	if c.Unreachable != nil {
		return c.Unreachable(err)
	}
	return err
}

func (c *Client) request(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.Server, "/")+path, body)
	if err != nil {
		return nil, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	return req, nil
}

// problem is the *Error an answer of status code with body data is.
func problem(code int, data []byte) *Error {
	e := &Error{api.Problem{Status: code, Title: http.StatusText(code)}}
	if json.Unmarshal(data, &e.Problem) != nil || e.Status == 0 {
		e.Status, e.Detail = code, strings.TrimSpace(string(data))
	}
	return e
}

// Do sends body (if not nil) as JSON, with headers given as name, value
// pairs (an empty value is left out), and decodes a 2xx answer into out
// (if not nil); any other answer is an *Error.
func (c *Client) Do(ctx context.Context, method, path string, body, out any, headers ...string) (http.Header, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := c.request(ctx, method, path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] != "" {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, c.unreachable(fmt.Errorf("%s %s: %w", method, path, err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return resp.Header, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		return resp.Header, problem(resp.StatusCode, data)
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.Header, fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	return resp.Header, nil
}

// Stream reads the server-sent events of path and calls fn with each
// event's name and data, until ctx ends (nil), fn fails (its error), or
// the server ends the stream (nil, or the read's error).
func (c *Client) Stream(ctx context.Context, path string, fn func(event, data string) error) error {
	req, err := c.request(ctx, "GET", path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	hc := *c.httpClient()
	hc.Timeout = 0 // a stream runs until stopped
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return c.unreachable(fmt.Errorf("GET %s: %w", path, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
		return problem(resp.StatusCode, data)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxAnswer)
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
