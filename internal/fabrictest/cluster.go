package fabrictest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/accelnet/accelnet/store/embedded"
)

// Cluster is an etcd cluster of embedded members on loopback, each with
// its own data directory, that a test can stop and start member by member.
type Cluster struct {
	t       testing.TB
	members []embedded.Member
	mu      sync.Mutex
	running []*embedded.Server
}

// NewCluster starts an n-member etcd cluster; it stops in t.Cleanup.
func NewCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{t: t, running: make([]*embedded.Server, n)}
	var initial []string
	for i := range n {
		m := embedded.Member{
			Name: fmt.Sprintf("etcd%d", i+1), Dir: t.TempDir(),
			ClientAddr: FreeAddr(t), PeerAddr: FreeAddr(t),
		}
		initial = append(initial, m.Name+"=http://"+m.PeerAddr)
		c.members = append(c.members, m)
	}
	for i := range c.members {
		c.members[i].InitialCluster = strings.Join(initial, ",")
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	c.Start(all...) // a new cluster's members wait for each other
	t.Cleanup(func() {
		for i := range c.members {
			c.Stop(i)
		}
	})
	return c
}

// handedOut are the ports FreeAddr gave out in this process.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreeAddr is a loopback address with a port nobody listens on (now).
func FreeAddr(t interface {
	Helper()
	Fatal(...any)
}) string {
	t.Helper()
	// A port the kernel picks for ":0" comes from the ephemeral range,
	// which every outgoing connection and every other test's ":0" draws
	// from too: between closing it here and the process binding it, one
	// of those can take it. Ports below that range are handed out by no
	// one, so pick one there at random (test processes pick apart).
	// Nor is one handed out twice in this process: free now is not free
	// once the caller of an earlier pick binds it (seen: an etcd member's
	// client port picked equal to another's peer port, not yet bound).
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 200 {
		port := 20000 + rand.IntN(32768-20000)
		if handedOut.ports[port] {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		lis, err := net.Listen("tcp", addr)
		if err != nil {
			continue // in use
		}
		lis.Close()
		handedOut.ports[port] = true
		return addr
	}
	t.Fatal("no free port between 20000 and 32767 on 127.0.0.1")
	return ""
}

// Endpoints are every member's client address.
func (c *Cluster) Endpoints() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, m.ClientAddr)
	}
	return out
}

// Start starts the given members (again, on their data), together.
func (c *Cluster) Start(members ...int) {
	c.t.Helper()
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for k, i := range members {
		wg.Go(func() {
			e, err := embedded.StartMember(c.members[i])
			errs[k] = err
			c.mu.Lock()
			c.running[i] = e
			c.mu.Unlock()
		})
	}
	wg.Wait()
	for k, err := range errs {
		if err != nil {
			c.t.Fatalf("start etcd member %d: %v", members[k], err)
		}
	}
}

// Stop stops member i (a no-op if it is not running).
func (c *Cluster) Stop(i int) {
	c.mu.Lock()
	e := c.running[i]
	c.running[i] = nil
	c.mu.Unlock()
	if e != nil {
		e.Close()
	}
}

// Leader is the index of the member leading the raft group, or -1.
func (c *Cluster) Leader() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.running {
		if e != nil && e.IsLeader() {
			return i
		}
	}
	return -1
}
