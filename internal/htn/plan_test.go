package htn_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/planbus/planbus/internal/htn"
)

// loopDomain never finishes: each step needs a new, larger number.
const loopDomain = `loop(?n) :- if(is(?m, +(?n, 1))), do(step(?n), loop(?m)).
step(?n) :- del(), add(at(?n)).
spin(?n) :- is(?m, +(?n, 1)), spin(?m).`

func TestPlanCanceled(t *testing.T) {
	p := mustParse(t, loopDomain)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := p.Plan(ctx, "loop(0)", htn.Options{})
	if !errors.Is(err, htn.ErrCanceled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Plan with a canceled context: got %v, want ErrCanceled wrapping context.Canceled", err)
	}
	if res == nil || len(res.Plans) != 0 {
		t.Errorf("canceled Plan returned plans: %+v", res)
	}
	if _, err := p.Query(ctx, "spin(0)", htn.Options{}); !errors.Is(err, htn.ErrCanceled) {
		t.Fatalf("Query with a canceled context: got %v, want ErrCanceled", err)
	}
}

func TestBudgetExceeded(t *testing.T) {
	p := mustParse(t, loopDomain)
	tests := []struct {
		name   string
		budget htn.Budget
	}{
		{"memory", htn.Budget{Memory: 64 << 10}},
		{"nodes", htn.Budget{Nodes: 100}},
		{"steps", htn.Budget{Steps: 1000}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := p.Plan(context.Background(), "loop(0)", htn.Options{Budget: tc.budget})
			if !errors.Is(err, htn.ErrBudgetExceeded) {
				t.Fatalf("got %v, want ErrBudgetExceeded", err)
			}
			if res.Partial == nil || res.Partial.Len() == 0 {
				t.Fatalf("no partial plan with ErrBudgetExceeded: %+v", res)
			}
			if len(res.Plans) != 0 {
				t.Errorf("got %d complete plans, want 0", len(res.Plans))
			}
		})
	}
	if _, err := p.Query(context.Background(), "spin(0)", htn.Options{Budget: htn.Budget{Memory: 64 << 10}}); !errors.Is(err, htn.ErrBudgetExceeded) {
		t.Errorf("Query: got %v, want ErrBudgetExceeded", err)
	}
}

// TestDefaultBudgetIsGenerous checks that a plan the reference's default
// budget truncates (deep1000 returns 305 steps there) is found whole.
func TestDefaultBudgetIsGenerous(t *testing.T) {
	p := mustParse(t, `count(?n) :- if(>(?n, 0), is(?m, -(?n, 1))), do(step(?n), count(?m)).
count(?n) :- else, if(), do().
step(?n) :- del(), add(done(?n)).`)
	res, err := p.Plan(context.Background(), "count(1000)", htn.Options{FirstOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Plans[0].Len(); got != 1000 {
		t.Errorf("plan length: got %d, want 1000", got)
	}
}

func TestQueryErrors(t *testing.T) {
	p := mustParse(t, "f(1).")
	tests := []struct {
		goal string
		want error
	}{
		{"f(?X), ?G", htn.ErrBadCall},
		{"is(?X, ?Y)", htn.ErrNotGround},
		{"is(?X, /(1, 0))", htn.ErrDivisionByZero},
		{"is(?X, /(1.0, 0))", htn.ErrDivisionByZero},
		{"is(?X, pow(2, 3))", htn.ErrUnknownFunction},
		{"<=(1, 2)", htn.ErrBadCall},
		{"assert(f(?X))", htn.ErrNotGround},
		{"assert(f(1))", htn.ErrFactExists},
		{"count(3, f(?X))", htn.ErrBadCall},
	}
	for _, tc := range tests {
		t.Run(tc.goal, func(t *testing.T) {
			_, err := p.Query(context.Background(), tc.goal, htn.Options{})
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			var re *htn.RuntimeError
			if !errors.As(err, &re) || re.Term == "" {
				t.Errorf("error %v does not name the term", err)
			}
		})
	}
}

func TestWriteOutput(t *testing.T) {
	p := mustParse(t, "item(a). item(b).")
	var out bytes.Buffer
	ans, err := p.Query(context.Background(), "item(?X), write(got(?X)), nl, writeln('done')", htn.Options{Output: &out})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := htn.FormatQuery(ans), "((?X = a), (?X = b))"; got != want {
		t.Errorf("answers: got %s, want %s", got, want)
	}
	if got, want := out.String(), "got(a)\ndone\ngot(b)\ndone\n"; got != want {
		t.Errorf("output: got %q, want %q", got, want)
	}
}

// TestConcurrentUse runs one Program from several goroutines (run the
// tests with -race).
func TestConcurrentUse(t *testing.T) {
	p := mustParse(t, taxiDomain)
	want := "[ { (walk(downtown,park)) } { (hail(taxi1,downtown), ride(taxi1,downtown,park), set-cash(12,8.500000000)) } ]"
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				res, err := p.Plan(context.Background(), "travel-to(park)", htn.Options{})
				if err != nil {
					errs <- err.Error()
					return
				}
				if got := htn.FormatPlans(res.Plans); got != want {
					errs <- got
					return
				}
				if _, err := p.Query(context.Background(), "assert(at(x)), atom_concat(a, b, ?Y)", htn.Options{}); err != nil {
					errs <- err.Error()
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestEmptyGoal(t *testing.T) {
	p := mustParse(t, "a.")
	res, err := p.Plan(context.Background(), "", htn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := htn.FormatPlans(res.Plans); got != "[ { () } ]" {
		t.Errorf("got %s, want [ { () } ]", got)
	}
	if got := htn.FormatPlans(nil); got != "null" {
		t.Errorf("FormatPlans(nil) = %s, want null", got)
	}
}
