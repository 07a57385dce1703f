package htn_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/planbus/planbus/internal/htn"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestConstructs runs each scenario in testdata/constructs/*.htn and
// compares plans, facts, errors and traces with the .golden file next to
// it. Header comments set the goal and options:
//
//	% goal: m, after
//	% mode: first
//	% budget: 1048576   (memory bytes)
//	% nodes: 50
//	% disabled: walk
//	% trace: on    (record the search and print it)
//
// A search that ends without a plan prints how far it got (failure:).
func TestConstructs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "constructs", "*.htn"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".htn")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			got := runScenario(t, string(src))
			golden := strings.TrimSuffix(file, ".htn") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("%s mismatch (-want +got):\n%s", golden, diff)
			}
		})
	}
}

func header(src, key string) string {
	for _, line := range strings.Split(src, "\n") {
		if v, ok := strings.CutPrefix(line, "% "+key+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func runScenario(t *testing.T, src string) string {
	t.Helper()
	prog, err := htn.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	goal := header(src, "goal")
	opts := htn.Options{FirstOnly: header(src, "mode") == "first"}
	if b := header(src, "budget"); b != "" {
		opts.Budget.Memory, _ = strconv.ParseInt(b, 10, 64)
	}
	if n := header(src, "nodes"); n != "" {
		opts.Budget.Nodes, _ = strconv.ParseInt(n, 10, 64)
	}
	if d := header(src, "disabled"); d != "" {
		opts.Disabled = func(op string) bool { return op == d }
	}
	opts.Trace = header(src, "trace") == "on"
	res, err := prog.Plan(context.Background(), goal, opts)
	var b strings.Builder
	fmt.Fprintf(&b, "goal: %s\n", goal)
	if opts.FirstOnly {
		var p *htn.Plan
		if res != nil && len(res.Plans) > 0 {
			p = &res.Plans[0]
		}
		fmt.Fprintf(&b, "plan: %s\nfacts: %s\n", htn.FormatPlan(p), htn.FormatPlanFacts(p))
	} else if res != nil {
		fmt.Fprintf(&b, "plans: %s\nfacts: %s\n", htn.FormatPlans(res.Plans), htn.FormatFacts(res.Plans))
	}
	if err != nil {
		fmt.Fprintf(&b, "error: %v\n", err)
	}
	if res != nil && res.Partial != nil {
		fmt.Fprintf(&b, "partial: %s\n", htn.FormatPlan(res.Partial))
	}
	if res != nil && res.Failure != nil {
		fmt.Fprintf(&b, "failure: %s\n", res.Failure)
	}
	if res != nil && opts.Trace {
		b.WriteString("trace:\n")
		for _, ev := range res.Trace {
			fmt.Fprintf(&b, "  %s\n", ev)
		}
	}
	if res != nil {
		for i, p := range res.Plans {
			fmt.Fprintf(&b, "plan %d:\n", i+1)
			for _, op := range p.Operators() {
				hidden := ""
				if op.Hidden {
					hidden = " (hidden)"
				}
				fmt.Fprintf(&b, "  %s%s\n", op, hidden)
				for _, s := range op.Trace() {
					var binds []string
					for _, bd := range s.Bindings {
						binds = append(binds, "?"+bd.Var+" = "+bd.Value.String())
					}
					fmt.Fprintf(&b, "    %s <- %s (line %d) {%s}\n", s.Task, s.Method, s.Line, strings.Join(binds, ", "))
				}
			}
		}
	}
	return b.String()
}
