// Command benchreport makes the project's figures from the commands that
// measure them, so that none is copied by hand: it runs the benchmarks of
// docs/measured.md's rows, keeps what they printed in docs/bench/ (one
// file per machine), and renders docs/measured.md and the README's table
// of headline figures from those files. With -evaluation it runs
// `accelnet eval` and writes docs/evaluation.md's table (and with -long
// docs/eval-grid.txt).
//
//	go run ./internal/benchreport                 the quick rows (about 5 minutes on 2 cores)
//	go run ./internal/benchreport -long           the long ones too (about ten minutes more)
//	go run ./internal/benchreport -only admission,elephants
//	go run ./internal/benchreport -render         render from docs/bench/ only
//	go run ./internal/benchreport -evaluation     docs/evaluation.md's table
//
// Run it from the repository's root on a quiet machine: stop your own
// background work first (the table says the load it started with).
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

func main() {
	long := flag.Bool("long", false, "run the long rows too")
	only := flag.String("only", "", "run only these rows (IDs, comma-separated)")
	renderOnly := flag.Bool("render", false, "run nothing: render docs/measured.md and the README's table from docs/bench/")
	evaluation := flag.Bool("evaluation", false, "run accelnet eval and write docs/evaluation.md's table (with -long, docs/eval-grid.txt too)")
	list := flag.Bool("list", false, "list the rows and their commands")
	flag.Parse()
	if err := run(*long, *only, *renderOnly, *evaluation, *list); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

func run(long bool, only string, renderOnly, evaluation, list bool) error {
	if _, err := os.Stat("go.mod"); err != nil {
		return fmt.Errorf("run it from the repository's root: %w", err)
	}
	if list {
		for _, r := range rows {
			kind := "quick"
			if r.Long {
				kind = "long"
			}
			fmt.Printf("%-24s %-5s %s\n", r.ID, kind, r.command())
		}
		return nil
	}
	if evaluation {
		return writeEvaluation(context.Background(), evaluationDoc, long, os.Stderr)
	}
	if !renderOnly {
		if err := measure(long, only); err != nil {
			return err
		}
	}
	return writeDocs()
}

// measure runs the rows asked for and records their output in this
// machine's file.
func measure(long bool, only string) error {
	m, err := thisMachine()
	if err != nil {
		return err
	}
	rec, err := loadRecord(m)
	if err != nil {
		return err
	}
	load := loadAverage()
	commit := gitCommit()
	date := time.Now().UTC().Format("2006-01-02")
	picked := map[string]bool{}
	for _, id := range strings.Split(only, ",") {
		if id != "" {
			picked[id] = true
		}
	}
	for _, r := range rows {
		if len(picked) > 0 && !picked[r.ID] || len(picked) == 0 && r.Long && !long {
			continue
		}
		fmt.Fprintf(os.Stderr, "== %s: %s\n", r.ID, r.command())
		out, err := runRow(r)
		if err != nil {
			return fmt.Errorf("%s: %w", r.ID, err)
		}
		res := parseResults(out)
		if len(res) == 0 {
			return fmt.Errorf("%s: no benchmark results in its output", r.ID)
		}
		rec.put(r, runResult{Command: r.command(), Output: resultLines(out), Date: date, Commit: commit, Load: load})
		if err := rec.save(); err != nil { // after every row: a long run keeps what it measured
			return err
		}
	}
	delete(picked, "")
	for id := range picked {
		if !slices.ContainsFunc(rows, func(r row) bool { return r.ID == id }) {
			return fmt.Errorf("no row %q (see -list)", id)
		}
	}
	return nil
}

// runRow runs a row's benchmark, its output copied to standard error as
// it comes.
func runRow(r row) (string, error) {
	cmd := exec.Command("go", r.args()...)
	cmd.Env = os.Environ()
	for _, e := range r.Env {
		k, v, _ := strings.Cut(e, "=")
		cmd.Env = append(cmd.Env, k+"="+strings.Trim(v, `"`))
	}
	var buf bytes.Buffer
	cmd.Stdout = io.MultiWriter(&buf, os.Stderr)
	cmd.Stderr = os.Stderr
	err := cmd.Run()
	return buf.String(), err
}

// resultLines are the lines of output that are benchmark results.
func resultLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 4 && strings.HasPrefix(f[0], "Benchmark") && len(parseResults(l)) == 1 {
			lines = append(lines, strings.Join(f, " "))
		}
	}
	return lines
}

// writeDocs renders docs/measured.md and the README's headline table from
// every machine's record.
func writeDocs() error {
	recs, err := loadRecords()
	if err != nil {
		return err
	}
	if err := os.WriteFile(measuredDoc, []byte(renderMeasured(recs)), 0o644); err != nil {
		return err
	}
	readme, err := os.ReadFile(readmeDoc)
	if err != nil {
		return err
	}
	next, err := replaceBetween(string(readme), headlineBegin, headlineEnd, renderHeadline(recs))
	if err != nil {
		return fmt.Errorf("%s: %w", readmeDoc, err)
	}
	return os.WriteFile(readmeDoc, []byte(next), 0o644)
}

// replaceBetween replaces what lies between the lines begin and end.
func replaceBetween(doc, begin, end, with string) (string, error) {
	i := strings.Index(doc, begin+"\n")
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("no %q … %q section", begin, end)
	}
	return doc[:i+len(begin)+1] + with + doc[j:], nil
}
