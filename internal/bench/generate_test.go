package bench

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A generated workload of a built-in one's size is that workload.
func TestGenerateMatchesBuiltins(t *testing.T) {
	ws, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*Workload{}
	for _, w := range ws {
		byName[w.Name] = w
	}
	for gen, builtin := range map[string]string{"chain-100": "chain-100", "fanout-1000": "fanout-1000", "many-plans-200": "many-plans"} {
		g, err := Generate(gen)
		if err != nil {
			t.Fatal(err)
		}
		b := byName[builtin]
		if diff := cmp.Diff(b.Tools, g.Tools); diff != "" {
			t.Errorf("%s tools differ from %s's (-builtin +generated):\n%s", gen, builtin, diff)
		}
		if g.MaxConcurrency != b.MaxConcurrency || g.Instances != b.Instances || g.SleepMs != b.SleepMs {
			t.Errorf("%s: maxConcurrency %d, instances %d, sleep %d; %s has %d, %d, %d", gen, g.MaxConcurrency, g.Instances,
				g.SleepMs, builtin, b.MaxConcurrency, b.Instances, b.SleepMs)
		}
	}
}

func TestGenerate(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		tools, instances, steps int
	}{
		{"chain-10", 10, 1, 10}, {"fanout-100", 102, 1, 3}, {"many-plans-7", 5, 7, 3},
	} {
		w, err := Generate(tc.name)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		steps, _ := w.CriticalPath()
		if len(w.Tools) != tc.tools || w.Instances != tc.instances || steps != tc.steps {
			t.Errorf("%s: %d tools, %d instances, %d steps; want %d, %d, %d", tc.name, len(w.Tools), w.Instances, steps,
				tc.tools, tc.instances, tc.steps)
		}
	}
	for _, bad := range []string{"chain", "chain-0", "chain-x", "ring-10", "fanout--1", "many-plans-2000000"} {
		if _, err := Generate(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("Generate(%q): err = %v, want one naming it", bad, err)
		}
	}
}

// The scaling set's widest fan-outs fit the plan limit (100,000 tools);
// one past it is refused, naming the limit.
func TestGeneratedPastThePlanLimit(t *testing.T) {
	for _, name := range []string{"fanout-10000", "fanout-50000"} {
		w, err := Generate(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Plan("p"); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	w, err := Generate("fanout-99999") // 100,001 tools
	if err != nil {
		t.Fatal(err)
	}
	if _, err = w.Plan("p"); err == nil || !strings.Contains(err.Error(), "maxItems") {
		t.Fatalf("a 100,001-tool plan: %v, want the limit named", err)
	}
}

func TestSelect(t *testing.T) {
	ws, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Select(ws, []string{"many-plans", "chain-10", "chain-100"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0] != ws[4] || got[1].Name != "chain-10" || got[2] != ws[0] {
		t.Errorf("selected %v", got)
	}
	if _, err := Select(ws, []string{"nope"}); err == nil {
		t.Error("an unknown name was selected")
	}
}
