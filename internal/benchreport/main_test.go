package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestFiguresAreWhatTheCommandsPrinted: docs/measured.md and the README's
// table are exactly what the recorded benchmark output renders to; every
// recorded command is its row's command today (a changed row is measured
// again, not left with an old command's figure); every row shows every
// metric it names; every row's benchmark exists.
func TestFiguresAreWhatTheCommandsPrinted(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	recs, err := loadRecords()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 {
		t.Fatal("no recorded figures in docs/bench")
	}
	doc, err := os.ReadFile(measuredDoc)
	if err != nil {
		t.Fatal(err)
	}
	if want := renderMeasured(recs); string(doc) != want {
		t.Errorf("%s is not what docs/bench renders to: run go run ./internal/benchreport -render (or measure again)", measuredDoc)
	}
	readme, err := os.ReadFile(readmeDoc)
	if err != nil {
		t.Fatal(err)
	}
	want, err := replaceBetween(string(readme), headlineBegin, headlineEnd, renderHeadline(recs))
	if err != nil {
		t.Fatal(err)
	}
	if string(readme) != want {
		t.Errorf("the README's headline table is not what docs/bench renders to: run go run ./internal/benchreport -render")
	}
	byID := map[string]row{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	for _, rec := range recs {
		for id, res := range rec.Results {
			r, ok := byID[id]
			if !ok {
				t.Errorf("%s records %q, which is no row", rec.path, id)
				continue
			}
			if res.Command != r.command() {
				t.Errorf("%s: %s was measured with %q; the row's command is now %q: measure it again (go run ./internal/benchreport -only %s)", rec.path, id, res.Command, r.command(), id)
			}
			if shown := r.Show(parseResults(strings.Join(res.Output, "\n"))); strings.Contains(shown, "—") {
				t.Errorf("%s: %s shows %q: a metric it names is not in its output", rec.path, id, shown)
			}
		}
	}
	for _, r := range rows {
		name := regexp.MustCompile(`^[A-Za-z0-9]+`).FindString(r.Bench)
		files, _ := filepath.Glob(filepath.Join(r.Pkg, "*_test.go"))
		found := false
		for _, f := range files {
			data, _ := os.ReadFile(f)
			found = found || strings.Contains(string(data), "func Benchmark"+name)
		}
		if !found {
			t.Errorf("row %s: no func Benchmark%s in %s", r.ID, name, r.Pkg)
		}
	}
}

// TestEvaluationTableIsWhatEvalPrints: docs/evaluation.md's table is what
// the evaluation prints today (it drifted: fat-tree:8 ECMP showed 4.20 and
// 0.460 where the command printed 4.40 and 0.495, and four methods of
// five).
func TestEvaluationTableIsWhatEvalPrints(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	table, err := evalTable(context.Background(), permutationCases())
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(evaluationDoc)
	if err != nil {
		t.Fatal(err)
	}
	want, err := replaceBetween(string(doc), evalBegin, evalEnd, table)
	if err != nil {
		t.Fatal(err)
	}
	if string(doc) != want {
		t.Errorf("%s's table is not what accelnet eval prints: run go run ./internal/benchreport -evaluation\nit prints:\n%s", evaluationDoc, table)
	}
}

// TestParseResults reads go test's result lines and nothing else.
func TestParseResults(t *testing.T) {
	out := `goos: linux
BenchmarkAdmission-2   	   30000	    283140 ns/op	      3532 intents/s	        15.31 p50_ms	        54.46 p99_ms
--- BENCH: BenchmarkAdmission-2
    admission_bench_test.go:112: 30000 intents
BenchmarkRecompute/fattree:48/leaf/fails-2         	      20	 136000000 ns/op	  1024 B/op
PASS`
	r := parseResults(out)
	if len(r) != 2 {
		t.Fatalf("%d lines, want 2: %+v", len(r), r)
	}
	if v, ok := r.metric("", "intents/s"); !ok || v != 3532 {
		t.Errorf("intents/s = %v %v", v, ok)
	}
	if v, ok := r.metric("fattree:48", "B/op"); !ok || v != 1024 {
		t.Errorf("B/op = %v %v", v, ok)
	}
	if got := show("", "{intents/s|int} intents/s, p99 {p99_ms|ms}")(r); got != "3,532 intents/s, p99 54 ms" {
		t.Errorf("show: %q", got)
	}
	if got := lines(resultLines(out)); got != 2 {
		t.Errorf("resultLines kept %d lines", got)
	}
}

func lines(l []string) int { return len(l) }
