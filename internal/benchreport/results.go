package main

import (
	"bufio"
	"strconv"
	"strings"
)

// results are the result lines `go test -bench` printed for a row.
type results []resultLine

type resultLine struct {
	Name    string // BenchmarkRecompute/fattree:48/leaf/fails-2
	Metrics map[string]float64
}

// parseResults reads result lines (name, iterations, then value-unit
// pairs) from go test's output, skipping everything else.
func parseResults(output string) results {
	var out results
	sc := bufio.NewScanner(strings.NewReader(output))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // a "--- BENCH:" heading, a log line
		}
		line := resultLine{Name: f[0], Metrics: map[string]float64{}}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			line.Metrics[f[i+1]] = v
		}
		out = append(out, line)
	}
	return out
}

// metric is a metric of the first line whose name contains line ("": the
// first line).
func (r results) metric(line, name string) (float64, bool) {
	for _, l := range r {
		if line == "" || strings.Contains(l.Name, line) {
			v, ok := l.Metrics[name]
			return v, ok
		}
	}
	return 0, false
}
