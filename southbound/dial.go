package southbound

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// RPCMetrics records every southbound gRPC call's latency and errors.
type RPCMetrics struct {
	seconds *prometheus.HistogramVec
	errors  *prometheus.CounterVec
}

// NewRPCMetrics registers the southbound RPC metrics with reg.
func NewRPCMetrics(reg prometheus.Registerer) *RPCMetrics {
	m := &RPCMetrics{
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "accelnet_southbound_rpc_seconds",
			Help:    "Latency of unary P4Runtime and gNMI calls (Write, Read's first answer, Get, Set …), by protocol and method.",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16),
		}, []string{"protocol", "method"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "accelnet_southbound_rpc_errors_total",
			Help: "P4Runtime and gNMI calls and streams that ended in an error, by protocol, method and gRPC code.",
		}, []string{"protocol", "method", "code"}),
	}
	if reg != nil {
		reg.MustRegister(m.seconds, m.errors)
	}
	return m
}

// Dialer is how the controller reaches switches: plaintext or TLS (with
// a client certificate for mutual TLS), RPC metrics, and one client
// connection per switch address that every protocol shares (Conn).
type Dialer struct {
	TLS     *tls.Config // nil: plaintext
	Metrics *RPCMetrics // nil: none

	mu    sync.Mutex
	conns map[string]*sharedConn
}

// sharedConn is a client connection and how many users hold it.
type sharedConn struct {
	cc   *grpc.ClientConn
	refs int
}

// Conn returns a client connection to addr and its release, which the
// caller calls once when done with it. The P4Runtime driver, the gNMI
// subscriptions and gNMI configuration share one connection to an
// address (HTTP/2 carries their streams side by side): a switch that
// serves both protocols on one port, as fabricsim does, costs one TCP
// connection, one TLS handshake and one set of gRPC goroutines instead of
// three — at k=48, 2,880 connections instead of 8,640. The last release closes
// it. A connection in transient failure (its switch unreachable, gRPC
// backing off) is not handed out again: the next caller dials afresh
// and tries at once, as it would have with a connection of its own; its
// present holders keep it until they release it.
func (d *Dialer) Conn(addr string) (*grpc.ClientConn, func(), error) {
	if d == nil {
		cc, err := grpc.NewClient(addr, d.Options()...)
		if err != nil {
			return nil, nil, err
		}
		return cc, func() { cc.Close() }, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.conns[addr]; s != nil {
		if st := s.cc.GetState(); st != connectivity.TransientFailure && st != connectivity.Shutdown {
			s.refs++
			return s.cc, d.release(addr, s), nil
		}
		delete(d.conns, addr)
	}
	cc, err := grpc.NewClient(addr, d.Options()...)
	if err != nil {
		return nil, nil, err
	}
	if d.conns == nil {
		d.conns = map[string]*sharedConn{}
	}
	s := &sharedConn{cc: cc, refs: 1}
	d.conns[addr] = s
	return cc, d.release(addr, s), nil
}

// release returns the function that gives one hold on s back.
func (d *Dialer) release(addr string, s *sharedConn) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			d.mu.Lock()
			s.refs--
			last := s.refs == 0
			if last && d.conns[addr] == s {
				delete(d.conns, addr)
			}
			d.mu.Unlock()
			if last {
				s.cc.Close()
			}
		})
	}
}

// Options are the gRPC dial options: credentials and, with Metrics, the
// interceptors that record every call by protocol (from the method's
// service) and method.
func (d *Dialer) Options() []grpc.DialOption {
	creds := insecure.NewCredentials()
	if d != nil && d.TLS != nil {
		creds = credentials.NewTLS(d.TLS)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if d != nil && d.Metrics != nil {
		m := d.Metrics
		opts = append(opts,
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, o ...grpc.CallOption) error {
				start := time.Now()
				err := invoker(ctx, method, req, reply, cc, o...)
				protocol, name := protocolOf(method), path.Base(method)
				m.seconds.WithLabelValues(protocol, name).Observe(time.Since(start).Seconds())
				if err != nil {
					m.errors.WithLabelValues(protocol, name, status.Code(err).String()).Inc()
				}
				return err
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, o ...grpc.CallOption) (grpc.ClientStream, error) {
				start := time.Now()
				protocol, name := protocolOf(method), path.Base(method)
				s, err := streamer(ctx, desc, cc, method, o...)
				if err != nil {
					m.errors.WithLabelValues(protocol, name, status.Code(err).String()).Inc()
					return nil, err
				}
				return &countedStream{ClientStream: s, m: m, protocol: protocol, method: name, start: start, ctx: ctx}, nil
			}),
		)
	}
	return opts
}

// protocolOf names the protocol of a full gRPC method name
// ("/p4.v1.P4Runtime/Write": p4runtime; "/gnmi.gNMI/Get": gnmi), else
// its service.
func protocolOf(method string) string {
	service := path.Dir(method)
	switch service {
	case "/p4.v1.P4Runtime":
		return "p4runtime"
	case "/gnmi.gNMI":
		return "gnmi"
	}
	return strings.TrimPrefix(service, "/")
}

// countedStream records a stream's errors, and for Read (a server stream
// of answers) its duration to the end.
type countedStream struct {
	grpc.ClientStream
	m                *RPCMetrics
	protocol, method string
	start            time.Time
	ctx              context.Context
	done             bool
}

func (s *countedStream) RecvMsg(msg any) error {
	err := s.ClientStream.RecvMsg(msg)
	if err != nil && !s.done {
		s.done = true
		if errors.Is(err, io.EOF) {
			s.m.seconds.WithLabelValues(s.protocol, s.method).Observe(time.Since(s.start).Seconds())
		} else if s.ctx.Err() == nil {
			s.m.errors.WithLabelValues(s.protocol, s.method, status.Code(err).String()).Inc()
		}
	}
	return err
}
