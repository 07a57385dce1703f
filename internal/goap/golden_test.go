package goap

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenCases plan the example domains; each writes testdata/<name>.golden
// with the plan in brief and the Plan JSON ToPlan makes of it, or the error.
var goldenCases = []struct {
	name     string
	example  string // examples/goap/<example>.goap.json, or testdata/domains/<example>.goap.json
	goal     string
	state    State
	disabled []string
}{
	{name: "woodcutter-build-cabin", example: "woodcutter", goal: "build-cabin"},
	{name: "woodcutter-build-cabin-no-shed", example: "woodcutter", goal: "build-cabin", state: State{"axe_in_shed": false, "tree": "pine"}},
	{name: "woodcutter-build-cabin-by-hand", example: "woodcutter", goal: "build-cabin", disabled: []string{"fetch", "shop"}},
	{name: "woodcutter-earn-gold", example: "woodcutter", goal: "earn-gold", state: State{"has_axe": true}},
	{name: "woodcutter-stock-wood", example: "woodcutter", goal: "stock-wood", state: State{"cabin": true, "wood": 1}},
	{name: "woodcutter-no-axe-no-hands", example: "woodcutter", goal: "build-cabin", disabled: []string{"chop", "gather"}},
	{name: "release-ship", example: "release", goal: "ship", state: State{"version": "2.1.0"}},
	{name: "release-ship-during-incident", example: "release", goal: "ship", state: State{"incident": true}},
	{name: "release-resolve-incident", example: "release", goal: "resolve-incident", state: State{"incident": true, "deployed": true, "replicas": 3}},
	{name: "release-scale-out", example: "release", goal: "ship", state: State{"deployed": true, "replicas": 1, "built": true}},
	// A derived fact (canCraftSign) as a precondition, a requires.
	{name: "farmer-write-signs", example: "farmer", goal: "write-signs"},
	// A precondition with or: each branch of craft-hoe's requires, and a
	// cost over a derived fact (materials >= 8 costs 2, else 4).
	{name: "farmer-hoe-from-nothing", example: "farmer", goal: "get-hoe"},
	{name: "farmer-hoe-from-logs", example: "farmer", goal: "get-hoe", state: State{"logs": 2}},
	{name: "farmer-hoe-from-planks", example: "farmer", goal: "get-hoe", state: State{"planks": 4}},
	{name: "farmer-hoe-from-planks-and-sticks", example: "farmer", goal: "get-hoe", state: State{"planks": 2, "sticks": 2}},
	{name: "farmer-hoe-no-wood", example: "farmer", goal: "get-hoe", state: State{"planks": 1, "sticks": 5}, disabled: []string{"chop"}},
	// A derived fact in a goal condition.
	{name: "farmer-stock-wood", example: "farmer", goal: "stock-wood", state: State{"planks": 3}},
	// A goal without conditions: the cheapest single action that applies.
	{name: "farmer-explore", example: "farmer", goal: "explore", state: State{"idle_ticks": 7}},
	{name: "farmer-explore-disabled", example: "farmer", goal: "explore", disabled: []string{"explore", "chop", "process-wood", "make-sticks", "craft-hoe", "craft-sign", "write-sign", "collect-drops"}},
}

// goldenProblem loads a golden case's domain and the options that
// disable its skills.
func goldenProblem(t *testing.T, example string, disabled []string) (*Domain, Options) {
	t.Helper()
	var d *Domain
	if doc, err := os.ReadFile(filepath.Join("testdata", "domains", example+".goap.json")); err == nil {
		d = mustDecode(t, string(doc))
	} else {
		d = loadExample(t, example)
	}
	opts := Options{}
	if disabled != nil {
		opts.Disabled = func(skill string) bool { return slices.Contains(disabled, skill) }
	}
	return d, opts
}

func TestGolden(t *testing.T) {
	for _, gc := range goldenCases {
		t.Run(gc.name, func(t *testing.T) {
			d, opts := goldenProblem(t, gc.example, gc.disabled)
			got := renderGolden(t, d, gc.state, gc.goal, opts)
			if gc.disabled != nil {
				got = fmt.Sprintf("disabled skills %v\n", gc.disabled) + got
			}
			golden := filepath.Join("testdata", gc.name+".golden")
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

func renderGolden(t *testing.T, d *Domain, s State, goal string, opts Options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "domain %s, goal %s, state %v\n", d.Name, goal, s)
	r, err := Plan(context.Background(), d, s, goal, opts)
	if err != nil {
		fmt.Fprintf(&b, "error: %v\n", err)
		return b.String()
	}
	fmt.Fprintf(&b, "cost %s in %d steps; %d actions, expanded %d states, generated %d\n", formatNumber(r.Cost), len(r.Steps), r.Stats.Actions, r.Stats.Expanded, r.Stats.Generated)
	for i, st := range r.Steps {
		fmt.Fprintf(&b, "%d. %s (skill %s, cost %s) %s\n", i+1, st.Action, st.Skill, formatNumber(st.Cost), st.Input)
	}
	p, err := ToPlan(r)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b.Write(doc)
	b.WriteByte('\n')
	return b.String()
}
