package bmv2test

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/accelnet/accelnet/models"
)

// BMv2 built with Thrift serves its runtime over it (simple_switch's
// SimpleSwitch service): the lab uses it only to give a switch's egress
// queues a rate, so that a link congests at a rate the test chooses
// (without it BMv2 forwards as fast as its threads run, and its queues
// only hold what they could not yet process). The calls are Thrift's
// binary protocol over its buffered transport, multiplexed by service
// name, as BMv2's server expects; the few lines here are all the lab
// needs of Thrift.

// thriftAvailable says whether bin was built with Thrift (its options
// include --thrift-port); the answer is cached per binary.
func thriftAvailable(bin string) bool {
	thriftMu.Lock()
	defer thriftMu.Unlock()
	if v, ok := thriftBuilt[bin]; ok {
		return v
	}
	out, _ := exec.Command(bin, "--help").CombinedOutput() // exits 0 or 1 by version: the text is what counts
	v := strings.Contains(string(out), "--thrift-port")
	thriftBuilt[bin] = v
	return v
}

var (
	thriftMu    sync.Mutex
	thriftBuilt = map[string]bool{}
)

// Thrift says whether the lab's switches serve BMv2's Thrift runtime.
func (l *Lab) Thrift() bool { return thriftAvailable(l.bin) }

// SetQueueRates gives every egress queue of sw a rate of pps packets a
// second, and a capacity of depth packets (0 leaves it as it is). It
// needs BMv2 built with Thrift (Lab.Thrift).
func (l *Lab) SetQueueRates(sw models.SwitchID, pps uint64, depth int32) error {
	l.mu.Lock()
	port, ok := l.thrift[sw]
	l.mu.Unlock()
	if !ok {
		return fmt.Errorf("%s serves no Thrift runtime (BMv2 built without it, or not started)", sw)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if rc, err := thriftCall(addr, "set_all_egress_queue_rates", thriftI64(1, int64(pps))); err != nil || rc != 0 {
		return fmt.Errorf("%s set_all_egress_queue_rates(%d): %d, %v", sw, pps, rc, err)
	}
	if depth > 0 {
		if rc, err := thriftCall(addr, "set_all_egress_queue_depths", thriftI32(1, depth)); err != nil || rc != 0 {
			return fmt.Errorf("%s set_all_egress_queue_depths(%d): %d, %v", sw, depth, rc, err)
		}
	}
	return nil
}

// Thrift's binary protocol: the type codes of the fields used here.
const (
	typeStop = 0
	typeI32  = 8
	typeI64  = 10
	// message types
	thriftCallMsg      = 1
	thriftReplyMsg     = 2
	thriftExceptionMsg = 3
	thriftVersion1     = 0x80010000
)

// thriftI32 and thriftI64 encode one argument field.
func thriftI32(id int16, v int32) []byte {
	b := []byte{typeI32, byte(id >> 8), byte(id)}
	return binary.BigEndian.AppendUint32(b, uint32(v))
}

func thriftI64(id int16, v int64) []byte {
	b := []byte{typeI64, byte(id >> 8), byte(id)}
	return binary.BigEndian.AppendUint64(b, uint64(v))
}

// thriftCall calls SimpleSwitch's method (one returning an i32) with
// the encoded argument fields, and returns what it returned.
func thriftCall(addr, method string, args ...[]byte) (int32, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	name := "simple_switch:" + method // TMultiplexedProtocol's service prefix
	msg := binary.BigEndian.AppendUint32(nil, thriftVersion1|thriftCallMsg)
	msg = binary.BigEndian.AppendUint32(msg, uint32(len(name)))
	msg = append(msg, name...)
	msg = binary.BigEndian.AppendUint32(msg, 1) // seqid
	for _, a := range args {
		msg = append(msg, a...)
	}
	msg = append(msg, typeStop)
	if _, err := c.Write(msg); err != nil {
		return 0, err
	}
	r := bufio.NewReader(c)
	var head struct{ Version, NameLen uint32 }
	if err := binary.Read(r, binary.BigEndian, &head); err != nil {
		return 0, fmt.Errorf("%s: reply: %w", method, err)
	}
	if head.Version&0xffff0000 != thriftVersion1 || head.NameLen > 256 {
		return 0, fmt.Errorf("%s: not a Thrift binary reply (%#x)", method, head.Version)
	}
	if _, err := io.CopyN(io.Discard, r, int64(head.NameLen)+4); err != nil { // name, seqid
		return 0, err
	}
	if t := head.Version & 0xff; t == thriftExceptionMsg {
		return 0, fmt.Errorf("%s: the server answered with an exception", method)
	} else if t != thriftReplyMsg {
		return 0, fmt.Errorf("%s: message type %d in reply", method, t)
	}
	// The result struct: field 0 (success) an i32, then stop.
	var f struct {
		Type byte
		ID   int16
		V    int32
	}
	if err := binary.Read(r, binary.BigEndian, &f.Type); err != nil {
		return 0, err
	}
	if f.Type != typeI32 {
		return 0, fmt.Errorf("%s: result field of type %d", method, f.Type)
	}
	if err := binary.Read(r, binary.BigEndian, &f.ID); err != nil {
		return 0, err
	}
	if err := binary.Read(r, binary.BigEndian, &f.V); err != nil {
		return 0, err
	}
	if f.ID != 0 {
		return 0, errors.New(method + ": no success field in the reply")
	}
	return f.V, nil
}
