package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/accelnet/accelnet/pathcalc"
)

// The tables of docs/evaluation.md: what `accelnet eval` prints for these
// arguments, as markdown (without its timing column, which varies from
// run to run). The grid is the long one (minutes), in its own file.
const (
	evalBegin    = "<!-- benchreport: accelnet eval --pattern permutation --fail none --trials 5 -->"
	evalEnd      = "<!-- /benchreport -->"
	evalGridFile = "docs/eval-grid.txt"
)

// permutationCases are the cells of `accelnet eval --pattern permutation
// --fail none --trials 5`.
func permutationCases() []pathcalc.EvalCase {
	var out []pathcalc.EvalCase
	for _, c := range pathcalc.StandardGrid(5, 0) {
		if c.Pattern == "permutation" && c.Fail == "" {
			out = append(out, c)
		}
	}
	return out
}

// evalTable evaluates cases and renders them as a markdown table.
func evalTable(ctx context.Context, cases []pathcalc.EvalCase) (string, error) {
	var b strings.Builder
	b.WriteString("| topology | method | QPs | MLU | MLU / bound | throughput | worst |\n|---|---|---|---|---|---|---|\n")
	for _, c := range cases {
		r, err := pathcalc.Evaluate(ctx, c)
		if err != nil {
			return "", fmt.Errorf("%s %s %s: %w", c.Topology, c.Pattern, c.Method, err)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %.2f | %.3f | %.3f | %.3f |\n", r.Topology, r.Method, r.QPs, r.MLU, r.MLUBoundRatio, r.ThroughputRatio, r.WorstThroughputRatio)
	}
	return b.String(), nil
}

// writeEvaluation rewrites doc's table from a fresh evaluation and, with
// long, the whole grid in docs/eval-grid.txt.
func writeEvaluation(ctx context.Context, doc string, long bool, progress io.Writer) error {
	table, err := evalTable(ctx, permutationCases())
	if err != nil {
		return err
	}
	data, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	next, err := replaceBetween(string(data), evalBegin, evalEnd, table)
	if err != nil {
		return fmt.Errorf("%s: %w", doc, err)
	}
	if err := os.WriteFile(doc, []byte(next), 0o644); err != nil {
		return err
	}
	if !long {
		return nil
	}
	var b strings.Builder
	b.WriteString("# go run ./cmd/accelnet eval --trials 1 (written by go run ./internal/benchreport -evaluation -long)\n" +
		"# mlu: max offered utilization over link directions and NICs; mlu/bound: over the NIC/leaf/pod cut bound;\n" +
		"# throughput: sum of max-min fair rates / sum of demands; every host offers its NIC's line rate.\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "topology\tfail\tpattern\tmethod\tqps\ttrials\tmlu\tmlu/bound\tthroughput\tworst\t")
	grid := pathcalc.StandardGrid(1, 0)
	for i, c := range grid {
		fmt.Fprintf(progress, "[%d/%d] %s %s %s %s\n", i+1, len(grid), c.Topology, c.Fail, c.Pattern, c.Method)
		r, err := pathcalc.Evaluate(ctx, c)
		if err != nil {
			return err
		}
		fail := r.Fail
		if fail == "" {
			fail = "none"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%.2f\t%.3f\t%.3f\t%.3f\t\n", r.Topology, fail, r.Pattern, r.Method, r.QPs, r.Trials, r.MLU, r.MLUBoundRatio, r.ThroughputRatio, r.WorstThroughputRatio)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return os.WriteFile(evalGridFile, []byte(b.String()), 0o644)
}
