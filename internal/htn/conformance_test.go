package htn_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/planbus/planbus/internal/htn"
)

// conformanceCase is one line of cases.jsonl.
type conformanceCase struct {
	Name          string  `json:"name"`
	Program       string  `json:"program"`
	Goal          string  `json:"goal"`
	Kind          string  `json:"kind"`
	Mode          string  `json:"mode"`
	Expected      string  `json:"expected"`
	ExpectedFacts *string `json:"expected_facts"`
	Notes         string  `json:"notes"`
}

// referenceBudget is the memory budget the conformance run uses. The
// reference engine's resolver works within about 1 MB and, when that runs
// out, prints the plan it was building as if it were complete; two cases
// (HtnPlannerMemoryBudgetTest) record that output. With a budget of the
// same order our planner stops at the same point, returns
// ErrBudgetExceeded and the branch it was on in Result.Partial, and this
// test prints Partial the way the reference does. Every other case stays
// far below this budget.
const referenceBudget = 1 << 20

// sharedDir finds a directory under the module's sibling "shared" checkout
// (../shared relative to the module root), or the override in env.
func sharedDir(t testing.TB, env, rel string) string {
	t.Helper()
	if d := os.Getenv(env); d != "" {
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "..", "shared", rel)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// vendoredCases is a copy of the shared cases kept in the repository, so
// the conformance test runs wherever the repository is cloned;
// TestVendoredCasesMatchShared keeps it equal to the shared file.
const vendoredCases = "testdata/conformance/cases.jsonl"

func TestVendoredCasesMatchShared(t *testing.T) {
	shared := filepath.Join(sharedDir(t, "PLANBUS_CONFORMANCE_DIR", filepath.Join("conformance", "inductorhtn")), "cases.jsonl")
	want, err := os.ReadFile(shared)
	if err != nil {
		t.Skipf("no shared conformance cases to compare with (%v)", err)
	}
	got, err := os.ReadFile(vendoredCases)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s: copy the shared file over it", vendoredCases, shared)
	}
}

func loadCases(t *testing.T) []conformanceCase {
	dir := sharedDir(t, "PLANBUS_CONFORMANCE_DIR", filepath.Join("conformance", "inductorhtn"))
	path := filepath.Join(dir, "cases.jsonl")
	if _, err := os.Stat(path); err != nil {
		path = vendoredCases
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("conformance cases: %v", err)
	}
	defer f.Close()
	var cases []conformanceCase
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var c conformanceCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cases
}

func TestConformance(t *testing.T) {
	cases := loadCases(t)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			prog, err := htn.Parse(c.Program)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			ctx := context.Background()
			first := c.Mode == "first"
			if c.Kind == "query" {
				ans, err := prog.Query(ctx, c.Goal, htn.Options{Budget: htn.Budget{Memory: referenceBudget}})
				if err != nil {
					t.Fatalf("Query(%q): %v", c.Goal, err)
				}
				if got := htn.FormatQuery(ans); got != c.Expected {
					t.Errorf("Query(%q)\n got %s\nwant %s", c.Goal, got, c.Expected)
				}
				return
			}
			res, err := prog.Plan(ctx, c.Goal, htn.Options{FirstOnly: first, Budget: htn.Budget{Memory: referenceBudget}})
			plans := res.Plans
			switch {
			case errors.Is(err, htn.ErrBudgetExceeded):
				plans = append(plans, *res.Partial)
			case err != nil:
				t.Fatalf("Plan(%q): %v", c.Goal, err)
			}
			var got, gotFacts string
			if first {
				var p *htn.Plan
				if len(plans) > 0 {
					p = &plans[0]
				}
				got, gotFacts = htn.FormatPlan(p), htn.FormatPlanFacts(p)
			} else {
				got, gotFacts = htn.FormatPlans(plans), htn.FormatFacts(plans)
			}
			if got != c.Expected {
				t.Errorf("Plan(%q)\n got %s\nwant %s", c.Goal, got, c.Expected)
			}
			if c.ExpectedFacts != nil && gotFacts != *c.ExpectedFacts {
				t.Errorf("facts of Plan(%q)\n got %s\nwant %s", c.Goal, gotFacts, *c.ExpectedFacts)
			}
		})
	}
}
