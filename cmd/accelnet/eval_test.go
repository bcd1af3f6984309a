package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/accelnet/accelnet/pathcalc"
)

func TestEvalCommandTableAndJSON(t *testing.T) {
	var out, progress bytes.Buffer
	c := evalConfig{Topology: "leafspine:16x16x16", Pattern: "permutation", Method: "accelnet", Fail: "none", Trials: 2}
	if err := runEval(context.Background(), c, &out, &progress); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "mlu/bound") || !strings.Contains(lines[1], "1.000") {
		t.Fatalf("table:\n%s", out.String())
	}
	if !strings.Contains(progress.String(), "[1/1]") {
		t.Errorf("progress: %q", progress.String())
	}
	out.Reset()
	c.JSON = true
	c.Method = ""
	if err := runEval(context.Background(), c, &out, &progress); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var row map[string]any
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		for _, k := range []string{"topology", "pattern", "method", "qps", "trials", "mlu", "mlu_bound_ratio", "throughput_ratio", "solve_ms"} {
			if _, ok := row[k]; !ok {
				t.Errorf("row lacks %s: %s", k, line)
			}
		}
		n++
	}
	if n != len(pathcalc.Methods) {
		t.Errorf("%d rows, want one per method", n)
	}
	if err := runEval(context.Background(), evalConfig{Pattern: "nope", Trials: 1}, &out, &progress); err == nil {
		t.Error("unknown pattern accepted")
	}
}
