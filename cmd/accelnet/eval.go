package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/accelnet/accelnet/pathcalc"
)

// evalConfig is `accelnet eval`'s command line.
type evalConfig struct {
	Topology, Pattern, Method, Fail string
	Trials                          int
	Seed                            uint64
	JSON                            bool
}

func newEvalCommand() *cobra.Command {
	var c evalConfig
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Compare routing methods on topologies × traffic patterns (MLU vs a lower bound, max-min throughput)",
		Long: `Evaluates how ECMP hashing (1, 4 or 8 QPs per connection) and accelnet's
placement route traffic patterns on fabrics. With no flags it runs the
standard grid; each flag narrows it to the values given.

accelnet places every connection whole, on the one QP it declares (what the
controller installs: it pins the QPs a tenant declares); accelnet-qps
splits connections into as many QPs as it takes to come within 2% of the
bound (qps column: QPs per connection), which a tenant gets by declaring
that many source ports. After a failure the two differ; without one they
agree.

Columns: mlu is the maximum offered utilization over every link direction and
NIC; mlu/bound divides it by a lower bound no routing can beat (NIC and
leaf/pod cut bounds); throughput is Σ rates / Σ demands under max-min fair
sharing (the steady state DCQCN converges to); worst is the lowest trial's.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			return runEval(ctx, c, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&c.Topology, "topology", "", "fabric: leafspine:LxHxS, oversub:LxHxS, fattree:K, rail:SERVERSxRAILSxSPINES")
	cmd.Flags().StringVar(&c.Pattern, "pattern", "", "permutation, stride, ring-allreduce, all-to-all, incast, multi-tenant")
	cmd.Flags().StringVar(&c.Method, "method", "", "ecmp, ecmp-4qp, ecmp-8qp, accelnet, accelnet-qps")
	cmd.Flags().StringVar(&c.Fail, "fail", "", "none, link or spine")
	cmd.Flags().IntVar(&c.Trials, "trials", 5, "traffic samples per cell (seeds seed+1…)")
	cmd.Flags().Uint64Var(&c.Seed, "seed", 0, "base seed")
	cmd.Flags().BoolVar(&c.JSON, "json", false, "one JSON object per line instead of a table")
	return cmd
}

func runEval(ctx context.Context, c evalConfig, out, progress io.Writer) error {
	if c.Trials < 1 {
		return fmt.Errorf("--trials must be at least 1")
	}
	fail := c.Fail
	if fail == "none" {
		fail = ""
	}
	var cases []pathcalc.EvalCase
	for _, ec := range pathcalc.StandardGrid(c.Trials, c.Seed) {
		if c.Topology != "" && ec.Topology != c.Topology ||
			c.Pattern != "" && ec.Pattern != c.Pattern ||
			c.Method != "" && ec.Method != c.Method ||
			c.Fail != "" && ec.Fail != fail {
			continue
		}
		cases = append(cases, ec)
	}
	if len(cases) == 0 {
		// Not in the standard grid: run exactly what was asked for.
		methods, patterns := pathcalc.Methods, pathcalc.Patterns
		if c.Method != "" {
			methods = []string{c.Method}
		}
		if c.Pattern != "" {
			patterns = []string{c.Pattern}
		}
		if c.Topology == "" {
			return fmt.Errorf("no standard case matches; give --topology")
		}
		for _, p := range patterns {
			for _, m := range methods {
				cases = append(cases, pathcalc.EvalCase{Topology: c.Topology, Pattern: p, Method: m, Fail: fail, Trials: c.Trials, Seed: c.Seed})
			}
		}
	}
	var tw *tabwriter.Writer
	if !c.JSON {
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "topology\tfail\tpattern\tmethod\tqps\ttrials\tmlu\tmlu/bound\tthroughput\tworst\tsolve ms\t")
	}
	enc := json.NewEncoder(out)
	for i, ec := range cases {
		fmt.Fprintf(progress, "[%d/%d] %s %s %s %s\n", i+1, len(cases), ec.Topology, orNone(ec.Fail), ec.Pattern, ec.Method)
		r, err := pathcalc.Evaluate(ctx, ec)
		if err != nil {
			return fmt.Errorf("%s %s %s %s: %w", ec.Topology, orNone(ec.Fail), ec.Pattern, ec.Method, err)
		}
		if c.JSON {
			if err := enc.Encode(r); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%.2f\t%.3f\t%.3f\t%.3f\t%.1f\t\n", r.Topology, orNone(r.Fail), r.Pattern, r.Method, r.QPs, r.Trials,
			r.MLU, r.MLUBoundRatio, r.ThroughputRatio, r.WorstThroughputRatio, r.SolveMS)
	}
	if tw != nil {
		return tw.Flush()
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
