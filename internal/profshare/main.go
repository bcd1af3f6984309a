// Command profshare says where a CPU profile's time went by stage: each
// sample is counted once, under the first stage whose pattern one of
// its frames contains. It reads `go tool pprof -traces`.
//
//	go test -c -o /tmp/ft.test ./internal/fabrictest
//	/tmp/ft.test -test.run '^$' -test.bench 'Admission$' -test.benchtime 60000x -test.cpuprofile /tmp/adm.prof
//	go run ./internal/profshare /tmp/ft.test /tmp/adm.prof
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// stages are matched in order; the first that matches a sample takes it.
var stages = []struct{ name, patterns string }{
	{"garbage collection", "runtime.gcBgMarkWorker runtime.bgsweep runtime.gcAssist"},
	{"the benchmark's HTTP clients", "fabrictest_test.benchAdmission net/http.(*persistConn)"},
	{"etcd", "go.etcd.io/etcd/server go.etcd.io/raft go.etcd.io/etcd/client"},
	{"the emulated switches", "accelnet/fabricsim. p4/v1._P4Runtime_ gnmi._GNMI_"},
	{"decisions", "accelnet/intents.(*Manager)"},
	{"reconciles and their P4Runtime client", "accelnet/controller. accelnet/southbound."},
	{"HTTP server", "net/http.(*conn).serve"},
	{"gRPC transport", "google.golang.org/grpc"},
}

var sampleLine = regexp.MustCompile(`^\s*([\d.]+)(ms|s|us|µs)\s+(.*)$`)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: profshare BINARY PROFILE")
		os.Exit(2)
	}
	cmd := exec.Command("go", "tool", "pprof", "-traces", os.Args[1], os.Args[2])
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shares, total := tally(out)
	if err := cmd.Wait(); err != nil {
		fmt.Fprintln(os.Stderr, "go tool pprof:", err)
		os.Exit(1)
	}
	for i, s := range stages {
		fmt.Printf("%-40s %7.2fs %5.1f%%\n", s.name, shares[i], 100*shares[i]/total)
	}
	fmt.Printf("%-40s %7.2fs %5.1f%%\n", "the rest", shares[len(stages)], 100*shares[len(stages)]/total)
	fmt.Printf("%-40s %7.2fs\n", "total", total)
}

// tally adds each sample's time to its stage (the last slot: none).
func tally(r io.Reader) ([]float64, float64) {
	shares := make([]float64, len(stages)+1)
	var total float64
	var value float64
	var frames []string
	flush := func() {
		if value > 0 {
			shares[stageOf(frames)] += value
			total += value
		}
		value, frames = 0, frames[:0]
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "-----------+") {
			flush()
			continue
		}
		if m := sampleLine.FindStringSubmatch(line); m != nil && value == 0 {
			v, _ := strconv.ParseFloat(m[1], 64)
			switch m[2] {
			case "ms":
				v /= 1e3
			case "us", "µs":
				v /= 1e6
			}
			value = v
			frames = append(frames, m[3])
			continue
		}
		if value > 0 {
			frames = append(frames, strings.TrimSpace(line))
		}
	}
	flush()
	return shares, total
}

func stageOf(frames []string) int {
	for i, s := range stages {
		for _, p := range strings.Fields(s.patterns) {
			for _, f := range frames {
				if strings.Contains(f, p) {
					return i
				}
			}
		}
	}
	return len(stages)
}
