package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// Where the figures go.
const (
	benchDir      = "docs/bench"
	measuredDoc   = "docs/measured.md"
	readmeDoc     = "README.md"
	evaluationDoc = "docs/evaluation.md"
	headlineBegin = "<!-- benchreport: headline figures (go run ./internal/benchreport) -->"
	headlineEnd   = "<!-- /benchreport -->"
)

// machine names the machine figures were measured on.
type machine struct {
	CPU       string `json:"cpu"`
	Cores     int    `json:"cores"`
	MemoryGiB int    `json:"memory_gib"`
}

func (m machine) String() string {
	return fmt.Sprintf("%s, %d cores, %d GiB", m.CPU, m.Cores, m.MemoryGiB)
}

// slug is the machine's file name.
func (m machine) slug() string {
	s := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(m.CPU, "-"))
	return fmt.Sprintf("%s-%dcores", strings.Trim(s, "-"), m.Cores)
}

// thisMachine reads the CPU model, cores and memory of this machine.
func thisMachine() (machine, error) {
	m := machine{Cores: runtime.NumCPU()}
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return m, fmt.Errorf("the CPU model: %w", err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			m.CPU = strings.TrimSpace(v)
			break
		}
	}
	if mem, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int
		if _, err := fmt.Sscanf(strings.SplitN(string(mem), "\n", 2)[0], "MemTotal: %d kB", &kb); err == nil {
			m.MemoryGiB = (kb + 1<<19) >> 20
		}
	}
	return m, nil
}

// loadAverage is the one-minute load average (-1 if unknown).
func loadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	v, err := strconv.ParseFloat(strings.Fields(string(data))[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// gitCommit is the short commit measured, "+" when the tree had changes.
func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		c += "+"
	}
	return c
}

// record is one machine's figures: every row's last result.
type record struct {
	Machine machine              `json:"machine"`
	Results map[string]runResult `json:"results"` // by row ID
	path    string
}

// runResult is what one row's command printed, and when.
type runResult struct {
	Command string   `json:"command"`
	Output  []string `json:"output"` // the result lines
	Date    string   `json:"date"`
	Commit  string   `json:"commit"`
	Load    float64  `json:"load"` // one-minute load average when it began
}

func (r *record) put(rw row, res runResult) {
	if r.Results == nil {
		r.Results = map[string]runResult{}
	}
	r.Results[rw.ID] = res
}

func (r *record) save() error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(r.path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(r.path, append(data, '\n'), 0o644)
}

// loadRecord reads m's record (empty if none yet).
func loadRecord(m machine) (*record, error) {
	r := &record{Machine: m, path: filepath.Join(benchDir, m.slug()+".json")}
	data, err := os.ReadFile(r.path)
	if os.IsNotExist(err) {
		return r, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("%s: %w", r.path, err)
	}
	return r, nil
}

// loadRecords reads every machine's record, by file name.
func loadRecords() ([]*record, error) {
	files, err := filepath.Glob(filepath.Join(benchDir, "*.json"))
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	var out []*record
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		r := &record{path: f}
		if err := json.Unmarshal(data, r); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, r)
	}
	return out, nil
}
