package bench

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"

	"github.com/planbus/planbus/internal/plan"
)

// Workload is one benchmark file as peer systems read it.
type Workload struct {
	Name           string `json:"name"`
	Description    string `json:"description"`
	MaxConcurrency int    `json:"maxConcurrency"`
	SleepMs        int    `json:"sleepMs"`
	Instances      int    `json:"instances"`
	Tools          []Tool `json:"tools"`
}

// Tool is one tool of a workload: a no-op, or a sleep of SleepMs (the
// workload's SleepMs when nil).
type Tool struct {
	ToolID       string   `json:"toolId"`
	Dependencies []string `json:"dependencies"`
	SleepMs      *int     `json:"sleepMs"`
}

// Load reads every *.json workload in dir, sorted by name.
func Load(dir string) ([]*Workload, error) {
	return load(os.DirFS(dir), dir)
}

// builtin holds the shared benchmark workloads, copied unchanged (peer
// systems run the same files), so the benchmark runs from any checkout
// or binary.
//
//go:embed workloads/*.json
var builtin embed.FS

// Builtin returns the workloads built into planbus.
func Builtin() ([]*Workload, error) {
	sub, err := fs.Sub(builtin, "workloads")
	if err != nil {
		return nil, err
	}
	return load(sub, "built-in workloads")
}

func load(fsys fs.FS, where string) ([]*Workload, error) {
	files, err := fs.Glob(fsys, "*.json")
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("bench: no *.json workloads in %s", where)
	}
	sort.Strings(files)
	var out []*Workload
	for _, f := range files {
		b, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		var w Workload
		if err := json.Unmarshal(b, &w); err != nil {
			return nil, fmt.Errorf("bench: %s: %w", path.Join(where, f), err)
		}
		if w.Name == "" {
			w.Name = f
		}
		if w.Instances < 1 {
			w.Instances = 1
		}
		out = append(out, &w)
	}
	return out, nil
}

func (w *Workload) sleep(i int) int {
	if s := w.Tools[i].SleepMs; s != nil {
		return *s
	}
	return w.SleepMs
}

// Plan converts the workload to Plan JSON: no-op tools are echo calls,
// sleeping ones sleep calls.
func (w *Workload) Plan(planID string) (*plan.Plan, error) {
	type tool struct {
		ToolID       string         `json:"toolId"`
		Skill        string         `json:"skill"`
		Input        map[string]int `json:"input"`
		Dependencies []string       `json:"dependencies"`
	}
	tools := make([]tool, len(w.Tools))
	for i, t := range w.Tools {
		tools[i] = tool{ToolID: t.ToolID, Skill: "echo", Input: map[string]int{}, Dependencies: t.Dependencies}
		if s := w.sleep(i); s > 0 {
			tools[i].Skill, tools[i].Input = "sleep", map[string]int{"ms": s}
		}
	}
	doc, err := json.Marshal(map[string]any{"planId": planID, "requestId": planID, "maxConcurrency": max(w.MaxConcurrency, 1),
		"timeoutMs": 600000, "tools": tools})
	if err != nil {
		return nil, err
	}
	return plan.Decode(doc)
}

// CriticalPath returns the number of tools on the longest dependency chain
// and the largest total sleep along any chain.
func (w *Workload) CriticalPath() (steps int, sleepMs int) {
	p, err := w.Plan("cp")
	if err != nil {
		return 0, 0
	}
	g := p.Graph()
	length := make([]int, g.Len())
	sleep := make([]int, g.Len())
	for _, i := range g.Order() {
		for _, d := range g.Deps(i) {
			length[i] = max(length[i], length[d])
			sleep[i] = max(sleep[i], sleep[d])
		}
		length[i]++
		sleep[i] += w.sleep(i)
		steps = max(steps, length[i])
		sleepMs = max(sleepMs, sleep[i])
	}
	return steps, sleepMs
}
