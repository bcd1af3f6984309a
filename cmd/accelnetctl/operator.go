package main

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/models"
)

func elephantsCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "elephants",
		Short: "Heavy flows no intent declares, found by sampling, and where they are pinned (operators)",
		Example: `  accelnetctl elephants
  accelnetctl elephants -o json | jq '.[] | select(.pinned | not)'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var page struct {
				Items []api.DetectedStatus `json:"items"`
			}
			if err := g.call(cmd, "GET", "/api/v1/elephants", nil, &page); err != nil {
				return err
			}
			if g.json() {
				if page.Items == nil {
					page.Items = []api.DetectedStatus{}
				}
				return printJSON(cmd.OutOrStdout(), page.Items)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "SRC\tDST\tSRC PORT\tGBPS\tRATE FROM\tLEAF\tPINNED\tPATH OR REASON")
			for _, e := range page.Items {
				where := pathString(e.Path)
				if !e.Pinned {
					where = e.Reason
				}
				fmt.Fprintf(w, "%s\t%s\t%d\t%.1f\t%s\t%s\t%v\t%s\n", e.Src, e.Dst, e.SrcPort, e.Gbps, e.RateSource, e.Leaf, e.Pinned, where)
			}
			return w.Flush()
		},
	}
}

func switchesCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "switches", Short: "What the switches have programmed (operators)"}
	entries := &cobra.Command{
		Use:   "entries NAME",
		Short: "Read a switch's entries back over P4Runtime: counts per table, and with -o json every entry",
		Example: `  accelnetctl switches entries leaf1
  accelnetctl switches entries spine2 -o json | jq '.entries.flow_pins | length'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := models.SwitchID(args[0]).Validate(); err != nil {
				return err
			}
			var v api.EntriesView
			if err := g.call(cmd, "GET", "/api/v1/switches/"+url.PathEscape(args[0])+"/entries", nil, &v); err != nil {
				return err
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), v)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "%s\nTABLE\tENTRIES\n", v.Switch)
			for _, table := range slices.Sorted(maps.Keys(v.Counts)) {
				fmt.Fprintf(w, "%s\t%d\n", table, v.Counts[table])
			}
			return w.Flush()
		},
	}
	cmd.AddCommand(entries)
	return cmd
}
