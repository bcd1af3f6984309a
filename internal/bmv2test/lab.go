// Package bmv2test runs accelnet against real BMv2 switches
// (simple_switch_grpc, built from p4lang/behavioral-model with PI): a lab
// of switches wired with veth pairs, hosts in network namespaces, and
// packets built in Go sent and captured on raw sockets. Tests skip with
// the reason when simple_switch_grpc, root or iproute2 is missing.
package bmv2test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/accelnet/accelnet/models"
)

// SimpleSwitch finds simple_switch_grpc: $BMV2_SIMPLE_SWITCH_GRPC, else
// on PATH. It returns "" and why when the lab cannot run here.
func SimpleSwitch() (string, string) {
	if os.Geteuid() != 0 {
		return "", "BMv2 lab tests need root (veth pairs and network namespaces)"
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", "BMv2 lab tests need iproute2's " + tool
		}
	}
	if p := os.Getenv("BMV2_SIMPLE_SWITCH_GRPC"); p != "" {
		return p, ""
	}
	p, err := exec.LookPath("simple_switch_grpc")
	if err != nil {
		return "", "simple_switch_grpc is not installed (build p4lang/behavioral-model with PI, see docs/real-switches.md) and BMV2_SIMPLE_SWITCH_GRPC is not set"
	}
	return p, ""
}

// Lab is a set of BMv2 switches and hosts wired by veth pairs. Everything
// it creates is removed in t.Cleanup.
type Lab struct {
	t      testing.TB
	bin    string
	tag    string // makes interface and namespace names unique per lab
	ifaces map[models.Endpoint]string
	cables map[models.Endpoint][2]string // far ends of a Wire's two veths
	hostNS map[string]string             // host name → network namespace
	hostIf map[string]string             // host name → its interface (in its namespace)
	mu     sync.Mutex
	procs  []*exec.Cmd
	logDir string
	stubs  []string
	thrift map[models.SwitchID]int // a switch's Thrift runtime port (BMv2 built with Thrift)
}

// NewLab prepares an empty lab.
func NewLab(t testing.TB, bin string) *Lab {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%d/%d", t.Name(), os.Getpid(), time.Now().UnixNano())
	l := &Lab{t: t, bin: bin, tag: fmt.Sprintf("%04x", h.Sum32()&0xffff), ifaces: map[models.Endpoint]string{}, cables: map[models.Endpoint][2]string{},
		hostNS: map[string]string{}, hostIf: map[string]string{}, logDir: t.TempDir(), thrift: map[models.SwitchID]int{}}
	if d := os.Getenv("BMV2_LOG_DIR"); d != "" { // keep the switches' logs
		l.logDir = d
	}
	t.Cleanup(l.close)
	return l
}

func (l *Lab) run(args ...string) {
	l.t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		l.t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// ifname is a unique interface name (at most 15 characters).
func (l *Lab) ifname(kind string, n int) string { return fmt.Sprintf("an%s%s%d", l.tag, kind, n) }

// quiet keeps the kernel from sending its own frames on a lab interface.
func (l *Lab) quiet(ns, ifc string) {
	args := []string{"sysctl", "-q", "-w", "net.ipv6.conf." + ifc + ".disable_ipv6=1"}
	if ns != "" {
		args = append([]string{"ip", "netns", "exec", ns}, args...)
	}
	_ = exec.Command(args[0], args[1:]...).Run() // best effort: IPv6 may be off already
}

// Wire connects two switch ports with a cable: each port's veth has its
// far end in the test's namespace, and tc joins the two far ends (what
// one receives leaves the other). SetLink pulls the cable by taking the
// far ends down, so each port loses carrier as at a fibre cut.
func (l *Lab) Wire(a, b models.Endpoint) {
	l.t.Helper()
	n := len(l.ifaces)
	ia, ib := l.ifname("s", n), l.ifname("s", n+1)
	ma, mb := l.ifname("m", n), l.ifname("m", n+1)
	l.run("ip", "link", "add", ia, "type", "veth", "peer", "name", ma)
	l.run("ip", "link", "add", ib, "type", "veth", "peer", "name", mb)
	for _, i := range []string{ia, ib, ma, mb} {
		l.quiet("", i)
		l.run("ip", "link", "set", i, "up")
	}
	for _, p := range [][2]string{{ma, mb}, {mb, ma}} {
		l.run("tc", "qdisc", "add", "dev", p[0], "ingress")
		l.run("tc", "filter", "add", "dev", p[0], "parent", "ffff:", "protocol", "all",
			"u32", "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", p[1])
	}
	l.ifaces[a], l.ifaces[b] = ia, ib
	l.cables[a], l.cables[b] = [2]string{ma, mb}, [2]string{ma, mb}
}

// Stub gives a switch port a veth pair whose other end stays in the
// test's namespace, and returns that end (to send into the port and
// capture what leaves it).
func (l *Lab) Stub(e models.Endpoint) string {
	l.t.Helper()
	n := len(l.ifaces)
	sw, peer := l.ifname("s", n), l.ifname("p", n)
	l.run("ip", "link", "add", sw, "type", "veth", "peer", "name", peer)
	for _, i := range []string{sw, peer} {
		l.quiet("", i)
		l.run("ip", "link", "set", i, "up")
	}
	l.ifaces[e] = sw
	l.stubs = append(l.stubs, peer)
	return peer
}

// Host puts host h in a namespace of its own, cabled to its leaf port,
// with its MAC. Its IP is not configured: tests send and capture raw
// frames, and a kernel that owned the address would answer RoCEv2
// packets with ICMP port-unreachable.
func (l *Lab) Host(h models.Host) {
	l.t.Helper()
	ns, hi := l.hostPort(h)
	l.quiet(ns, hi)
	l.run("ip", "netns", "exec", ns, "ip", "link", "set", hi, "address", h.NICMAC().String())
	l.run("ip", "netns", "exec", ns, "ip", "link", "set", hi, "up")
}

// hostPort makes h's namespace and the veth cabling it to its leaf port
// (the switch's end up) and returns the namespace and h's interface.
func (l *Lab) hostPort(h models.Host) (ns, hi string) {
	l.t.Helper()
	n := len(l.ifaces)
	sw := l.ifname("s", n)
	hi = l.ifname("h", n)
	ns = "an" + l.tag + h.Name
	l.run("ip", "netns", "add", ns)
	l.hostNS[h.Name] = ns
	l.run("ip", "link", "add", sw, "type", "veth", "peer", "name", hi)
	l.run("ip", "link", "set", hi, "netns", ns)
	l.quiet("", sw)
	l.run("ip", "link", "set", sw, "up")
	l.ifaces[h.Attach] = sw
	l.hostIf[h.Name] = hi
	return ns, hi
}

// PlainHost puts host h in a namespace of its own, cabled to its leaf
// port, as a server is set up with nothing known of the fabric: its NIC
// keeps the MAC the kernel gave it, and it has its address (prefix bits
// long) and a default route via gw. No neighbour entry is written. It
// returns the NIC's MAC.
func (l *Lab) PlainHost(h models.Host, bits int, gw netip.Addr) models.MAC {
	l.t.Helper()
	ns, hi := l.hostPort(h)
	// A veth leaves the UDP checksum to be filled in by whatever receives
	// the frame in the same kernel (checksum offload); BMv2 reads it off
	// the wire unfilled and the far host drops it as corrupt. A NIC
	// fills it in hardware: here the kernel does it before sending.
	l.run("ip", "netns", "exec", ns, "ethtool", "-K", hi, "tx", "off")
	l.run("ip", "netns", "exec", ns, "ip", "link", "set", hi, "up")
	l.run("ip", "netns", "exec", ns, "ip", "addr", "add", netip.PrefixFrom(h.IP, bits).String(), "dev", hi)
	l.run("ip", "netns", "exec", ns, "ip", "route", "add", "default", "via", gw.String())
	out, err := exec.Command("ip", "netns", "exec", ns, "cat", "/sys/class/net/"+hi+"/address").Output()
	if err != nil {
		l.t.Fatalf("the MAC of %s: %v", h.Name, err)
	}
	var mac models.MAC
	if err := mac.UnmarshalText([]byte(strings.TrimSpace(string(out)))); err != nil {
		l.t.Fatalf("the MAC of %s: %v", h.Name, err)
	}
	return mac
}

// Interface is the lab interface of a switch port.
func (l *Lab) Interface(e models.Endpoint) string { return l.ifaces[e] }

// SetLink pulls the cable at a switch port (wired with Wire) or plugs it
// back in. The switches' own interfaces stay up: BMv2 stops receiving on
// every port when one of its interfaces is set down (p4lang/behavioral-
// model issue 1215), which is not what a cut cable does to a switch.
func (l *Lab) SetLink(e models.Endpoint, up bool) {
	l.t.Helper()
	c, ok := l.cables[e]
	if !ok {
		l.t.Fatalf("%s is not cabled to another switch port", e)
	}
	state := "down"
	if up {
		state = "up"
	}
	for _, i := range c {
		l.run("ip", "link", "set", i, state)
	}
}

// Start runs simple_switch_grpc for a switch with its ports as wired so
// far and returns its P4Runtime address. It starts with no program
// (--no-p4): the controller pushes one.
func (l *Lab) Start(sw models.Switch) string {
	l.t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(l.t))
	args := []string{"--device-id", fmt.Sprint(sw.DeviceID), "--no-p4", "--log-file", filepath.Join(l.logDir, string(sw.Name)), "--log-flush"}
	for e, ifc := range l.ifaces {
		if e.Switch == sw.Name {
			args = append(args, "-i", fmt.Sprintf("%d@%s", e.Port, ifc))
		}
	}
	if l.Thrift() {
		// BMv2's Thrift server listens on every address: the lab lets
		// only loopback reach it while the switch runs.
		port := freePort(l.t)
		args = append(args, "--thrift-port", fmt.Sprint(port))
		l.loopbackOnly(port)
		l.mu.Lock()
		l.thrift[sw.Name] = port
		l.mu.Unlock()
	}
	args = append(args, "--", "--grpc-server-addr", addr, "--cpu-port", "255")
	cmd := exec.Command(l.bin, args...)
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		l.t.Fatalf("start %s: %v", l.bin, err)
	}
	l.mu.Lock()
	l.procs = append(l.procs, cmd)
	l.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("simple_switch_grpc for %s not serving at %s", sw.Name, addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freePort is a TCP port free on loopback now.
func freePort(t testing.TB) int {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().(*net.TCPAddr).Port
}

// loopbackOnly drops TCP to port that does not arrive on loopback, until
// the lab closes (with iptables; without it, the port stays open).
func (l *Lab) loopbackOnly(port int) {
	for _, ipt := range []string{"iptables", "ip6tables"} {
		rule := []string{"INPUT", "-p", "tcp", "--dport", fmt.Sprint(port), "!", "-i", "lo", "-j", "DROP"}
		if exec.Command(ipt, append([]string{"-I"}, rule...)...).Run() == nil {
			l.t.Cleanup(func() { _ = exec.Command(ipt, append([]string{"-D"}, rule...)...).Run() })
		}
	}
}

func (l *Lab) close() {
	l.mu.Lock()
	for _, p := range l.procs {
		_ = p.Process.Kill()
		_, _ = p.Process.Wait()
	}
	l.mu.Unlock()
	for e, ifc := range l.ifaces {
		_ = exec.Command("ip", "link", "del", ifc).Run() // deletes the peer too
		_ = e
	}
	for _, ns := range l.hostNS {
		_ = exec.Command("ip", "netns", "del", ns).Run()
	}
}

// Socket is a raw AF_PACKET socket on one interface.
type Socket struct{ fd int }

// Close closes the socket.
func (s *Socket) Close() { _ = unix.Close(s.fd) }

// OpenSocket opens a raw socket on ifc, in network namespace ns ("": the
// test's own).
func OpenSocket(ns, ifc string) (*Socket, error) {
	fd, err := inNamespace(ns, func() (int, error) {
		ifi, err := net.InterfaceByName(ifc)
		if err != nil {
			return 0, err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return 0, err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
			unix.Close(fd)
			return 0, err
		}
		return fd, nil
	})
	if err != nil {
		return nil, err
	}
	return &Socket{fd: fd}, nil
}

// inNamespace runs open in network namespace ns ("": the test's own) and
// returns the socket it made. A socket stays in the namespace it was made
// in, so a locked thread enters ns, makes it, and ends with the goroutine.
func inNamespace(ns string, open func() (int, error)) (int, error) {
	type result struct {
		fd  int
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if ns != "" {
			f, err := os.Open("/var/run/netns/" + ns)
			if err != nil {
				done <- result{err: err}
				return
			}
			defer f.Close()
			if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
				done <- result{err: fmt.Errorf("setns %s: %w", ns, err)}
				return
			}
		}
		fd, err := open()
		done <- result{fd: fd, err: err}
	}()
	r := <-done
	return r.fd, r.err
}

// UDPSocket is a kernel UDP socket in a host's namespace: the kernel
// resolves its next hop with ARP, as a host's stack does.
type UDPSocket struct{ fd int }

// Close closes the socket.
func (s *UDPSocket) Close() { _ = unix.Close(s.fd) }

// OpenUDP opens a UDP socket bound to addr:port in namespace ns.
func OpenUDP(ns string, addr netip.Addr, port uint16) (*UDPSocket, error) {
	fd, err := inNamespace(ns, func() (int, error) {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
		if err != nil {
			return 0, err
		}
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: addr.As4(), Port: int(port)}); err != nil {
			unix.Close(fd)
			return 0, err
		}
		return fd, nil
	})
	if err != nil {
		return nil, err
	}
	return &UDPSocket{fd: fd}, nil
}

// SendTo sends a datagram to addr:port.
func (s *UDPSocket) SendTo(b []byte, addr netip.Addr, port uint16) error {
	return unix.Sendto(s.fd, b, 0, &unix.SockaddrInet4{Addr: addr.As4(), Port: int(port)})
}

// Recv waits up to timeout for a datagram; nil if none came.
func (s *UDPSocket) Recv(timeout time.Duration) []byte {
	tv := unix.NsecToTimeval(timeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(s.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return nil
	}
	buf := make([]byte, 2048)
	n, _, err := unix.Recvfrom(s.fd, buf, 0)
	if err != nil {
		return nil
	}
	return buf[:n]
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Send writes a frame.
func (s *Socket) Send(frame []byte) error {
	_, err := unix.Write(s.fd, frame)
	return err
}

// Recv reads frames until match accepts one or timeout passes; nil then.
func (s *Socket) Recv(timeout time.Duration, match func([]byte) bool) []byte {
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 9216)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return nil
		}
		tv := unix.NsecToTimeval(left.Nanoseconds())
		_ = unix.SetsockoptTimeval(s.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		n, _, err := unix.Recvfrom(s.fd, buf, 0)
		if err != nil {
			if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
				continue
			}
			return nil
		}
		if match(buf[:n]) {
			return append([]byte(nil), buf[:n]...)
		}
	}
}

// RoCEv2 is a RoCEv2 packet: Ethernet, IPv4, UDP to 4791, the InfiniBand
// BTH (RDMA WRITE, destination QP qp) and a payload, checksummed.
func RoCEv2(srcMAC, dstMAC models.MAC, src, dst netip.Addr, srcPort uint16, qp uint32, payload int) []byte {
	f := make([]byte, 0, 14+20+8+12+payload+4)
	f = append(f, dstMAC[:]...)
	f = append(f, srcMAC[:]...)
	f = binary.BigEndian.AppendUint16(f, 0x0800)
	ipLen := 20 + 8 + 12 + payload + 4
	ip := []byte{0x45, 26 << 2, byte(ipLen >> 8), byte(ipLen), 0, 0, 0x40, 0, 64, 17, 0, 0}
	s4, d4 := src.As4(), dst.As4()
	ip = append(ip, s4[:]...)
	ip = append(ip, d4[:]...)
	binary.BigEndian.PutUint16(ip[10:], checksum(ip))
	f = append(f, ip...)
	f = binary.BigEndian.AppendUint16(f, srcPort)
	f = binary.BigEndian.AppendUint16(f, 4791)
	f = binary.BigEndian.AppendUint16(f, uint16(8+12+payload+4))
	f = binary.BigEndian.AppendUint16(f, 0) // RoCEv2 sets no UDP checksum
	bth := []byte{0x0a, 0, 0xff, 0xff, 0, byte(qp >> 16), byte(qp >> 8), byte(qp), 0x80, 0, 0, 1}
	f = append(f, bth...)
	f = append(f, make([]byte, payload+4)...) // payload and ICRC (not checked by switches)
	return f
}

func checksum(b []byte) uint16 {
	sum := uint32(0)
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// Parsed is what a captured frame says of a RoCEv2 packet.
type Parsed struct {
	SrcMAC, DstMAC models.MAC
	Src, Dst       netip.Addr
	SrcPort        uint16
	TTL            uint8
	OK             bool // IPv4/UDP to 4791 with a valid IP checksum
}

// Parse reads a captured frame.
func Parse(f []byte) Parsed {
	var p Parsed
	if len(f) < 14+20+8 || binary.BigEndian.Uint16(f[12:14]) != 0x0800 {
		return p
	}
	copy(p.DstMAC[:], f[0:6])
	copy(p.SrcMAC[:], f[6:12])
	ip := f[14:34]
	if ip[9] != 17 || checksum(ip) != 0 {
		return p
	}
	p.TTL = ip[8]
	p.Src, p.Dst = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
	udp := f[34:]
	p.SrcPort = binary.BigEndian.Uint16(udp[0:2])
	p.OK = binary.BigEndian.Uint16(udp[2:4]) == 4791
	return p
}

// Namespace is a host's network namespace, and Iface its interface there.
func (l *Lab) Namespace(host string) string { return l.hostNS[host] }

// Iface is a host's interface (in its namespace).
func (l *Lab) Iface(host string) string { return l.hostIf[host] }

// Context is a context that ends with the test.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}
