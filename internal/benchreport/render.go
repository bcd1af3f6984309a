package main

import (
	"fmt"
	"slices"
	"strings"
)

// A table is the rows one machine measured in one session: the same
// date, commit and starting load. Rows measured at other times make other
// tables.
type table struct {
	rec          *record
	date, commit string
	load         float64
	long         bool
	rows         []row
	results      []runResult
}

// tables groups a record's results by when and on what they were made.
func tables(rec *record) []table {
	var out []table
	for _, long := range []bool{false, true} {
		for _, r := range rows {
			res, ok := rec.Results[r.ID]
			if !ok || r.Long != long {
				continue
			}
			i := slices.IndexFunc(out, func(t table) bool {
				return t.long == long && t.date == res.Date && t.commit == res.Commit
			})
			if i < 0 {
				out = append(out, table{rec: rec, date: res.Date, commit: res.Commit, load: res.Load, long: long})
				i = len(out) - 1
			}
			out[i].rows = append(out[i].rows, r)
			out[i].results = append(out[i].results, res)
			out[i].load = max(out[i].load, res.Load)
		}
	}
	return out
}

// loadText says how busy the machine was when the table's rows began.
func loadText(load float64) string {
	switch {
	case load < 0:
		return "load unknown"
	case load < 0.5:
		return fmt.Sprintf("idle (load %.2f)", load)
	}
	return fmt.Sprintf("**not idle** (load %.2f)", load)
}

// targetText is a row's target cell: the target and whether it is met.
func targetText(r row, res results) string {
	if r.Target == nil {
		return ""
	}
	if r.Target.met(res) {
		return r.Target.Text + ": met"
	}
	why := ""
	if r.Why != "" {
		why = fmt.Sprintf(" ([why](%s))", r.Why)
	}
	return r.Target.Text + ": **not met**" + why
}

// renderMeasured is docs/measured.md.
func renderMeasured(recs []*record) string {
	var b strings.Builder
	b.WriteString(`# Measured

Every figure on this page is what the command beside it printed, on the
machine named above its table, at the date and commit given; nothing here
is copied by hand. ` + "`go run ./internal/benchreport`" + ` runs the quick rows
(about eight minutes on 2 cores) and ` + "`-long`" + ` the long ones too (about
ten minutes more); each run keeps the benchmarks' output in ` + "`docs/bench/`" + ` (a
file per machine) and renders this page and the README's table from
them (` + "`-render`" + ` renders only). A test renders them again and fails
when this page disagrees. Measure on a quiet machine: the table says the
load the rows began with.

Where a target is not met, the link goes to the analysis
([scaling.md](scaling.md)).
`)
	for _, rec := range recs {
		for _, t := range tables(rec) {
			kind := "quick rows"
			if t.long {
				kind = "long rows"
			}
			fmt.Fprintf(&b, "\n## %s — %s\n\n%s, commit `%s`, %s.\n\n", rec.Machine, kind, t.date, t.commit, loadText(t.load))
			b.WriteString("| figure | value | target | command |\n|---|---|---|---|\n")
			for i, r := range t.rows {
				res := parseResults(strings.Join(t.results[i].Output, "\n"))
				fmt.Fprintf(&b, "| %s | %s | %s | `%s` |\n", r.Figure, r.Show(res), targetText(r, res), t.results[i].Command)
			}
		}
	}
	return b.String()
}

// renderHeadline is the README's table: each headline row as last
// measured on any machine, with where.
func renderHeadline(recs []*record) string {
	var b strings.Builder
	b.WriteString("| figure | value | target | measured on |\n|---|---|---|---|\n")
	for _, r := range rows {
		if !r.Headline {
			continue
		}
		var best *record
		var res runResult
		for _, rec := range recs {
			if got, ok := rec.Results[r.ID]; ok && (best == nil || got.Date > res.Date) {
				best, res = rec, got
			}
		}
		if best == nil {
			continue
		}
		parsed := parseResults(strings.Join(res.Output, "\n"))
		fmt.Fprintf(&b, "| %s | %s | %s | %s, %s |\n", r.Short, r.Show(parsed), strings.ReplaceAll(targetText(r, parsed), "](", "](docs/"),
			best.Machine.CPU, res.Date)
	}
	return b.String()
}
