package htn_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/planbus/planbus/internal/htn"
)

func atom(name string) htn.Term { return htn.Term{Kind: htn.Atom, Name: name} }

func fn(name string, args ...htn.Term) htn.Term {
	return htn.Term{Kind: htn.Compound, Name: name, Args: args}
}

// TestFailure checks the furthest failure of searches that find no plan:
// the deepest task, and at the same depth the condition that got furthest
// along its if() (the reference's RecordFailure), with the last
// failureContext in force.
func TestFailure(t *testing.T) {
	tests := []struct {
		name     string
		src      string
		goal     string
		disabled string
		want     *htn.Failure
	}{{
		name: "furthest goal of the if at the same depth",
		src: `at(downtown). cash(2).
t(?y) :- if(at(?x), nosuch(?x)), do(go(?y)).
t(?y) :- if(at(?x), cash(?c), >=(?c, 10)), do(go(?y)).
go(?y) :- del(), add(at(?y)).`,
		goal: "t(park)",
		want: &htn.Failure{Depth: 1, Task: fn("t", atom("park")), Reason: htn.FailCondition, Method: "t(?y)", Line: 3,
			Condition: fn(">=", htn.Term{Kind: htn.Integer, Name: "2"}, htn.Term{Kind: htn.Integer, Name: "10"}), ConditionIndex: 2},
	}, {
		name: "the first of equal failures",
		src: `t :- if(a), do(x).
t :- if(b), do(x).
x :- del(), add(done).`,
		goal: "t",
		want: &htn.Failure{Depth: 1, Task: atom("t"), Reason: htn.FailCondition, Method: "t", Line: 1, Condition: atom("a")},
	}, {
		name: "deeper wins over further along",
		src: `a. b.
t :- if(a, b, c), do(x).
t :- if(), do(x, y).
x :- del(), add(done).
y :- if(z), do().`,
		goal: "t",
		want: &htn.Failure{Depth: 3, Task: atom("y"), Reason: htn.FailCondition, Method: "y", Line: 5, Condition: atom("z")},
	}, {
		name: "unbound variables keep their names",
		src: `t(?x) :- if(pick(?x, ?y), ok(?y)), do().
pick(1, 2).`,
		goal: "t(?q)",
		want: &htn.Failure{Depth: 1, Task: fn("t", htn.Term{Kind: htn.Variable, Name: "q"}), Reason: htn.FailCondition, Method: "t(?x)", Line: 1,
			Condition: fn("ok", htn.Term{Kind: htn.Integer, Name: "2"}), ConditionIndex: 1},
	}, {
		name: "failure context",
		src: `n(1).
t :- if(failureContext(first, 1), n(?a), failureContext(second, ?a), n(2)), do().`,
		goal: "t",
		want: &htn.Failure{Depth: 1, Task: atom("t"), Reason: htn.FailCondition, Method: "t", Line: 2,
			Condition: fn("n", htn.Term{Kind: htn.Integer, Name: "2"}), ConditionIndex: 3,
			Context: []htn.Term{atom("second"), {Kind: htn.Integer, Name: "1"}}},
	}, {
		name: "a context undone by backtracking is not reported",
		src: `n(1). n(2).
t :- if(n(?a), c(?a), m(?a)), do().
c(1) :- failureContext(one), nope.
c(2).`,
		goal: "t",
		want: &htn.Failure{Depth: 1, Task: atom("t"), Reason: htn.FailCondition, Method: "t", Line: 2,
			Condition: fn("m", htn.Term{Kind: htn.Integer, Name: "2"}), ConditionIndex: 2},
	}, {
		name: "a context stays in force for the rest of the branch",
		src: `n(1).
t :- if(n(?a), c(?a), m(?a)), do().
c(1) :- failureContext(one).`,
		goal: "t",
		want: &htn.Failure{Depth: 1, Task: atom("t"), Reason: htn.FailCondition, Method: "t", Line: 2,
			Condition: fn("m", htn.Term{Kind: htn.Integer, Name: "1"}), ConditionIndex: 2, Context: []htn.Term{atom("one")}},
	}, {
		name: "no method",
		src: `t :- if(), do(a, misspelt).
a :- del(), add(did).`,
		goal: "t",
		want: &htn.Failure{Depth: 3, Task: atom("misspelt"), Reason: htn.FailNoMethod, Detail: "no operator or method takes it"},
	}, {
		name: "disabled operator",
		src:  `t :- if(), do(walk). walk :- del(), add(walked).`,
		goal: "t", disabled: "walk",
		want: &htn.Failure{Depth: 2, Task: atom("walk"), Reason: htn.FailOperator, Detail: "operator walk is disabled"},
	}, {
		name: "operator that does not apply",
		src:  `t :- if(), do(put(?x)). put(?x) :- del(), add(on(?x)).`,
		goal: "t",
		want: &htn.Failure{Depth: 2, Task: fn("put", htn.Term{Kind: htn.Variable, Name: "x"}), Reason: htn.FailOperator,
			Detail: "operator put(?x) does not apply: its variables are not all bound"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prog, err := htn.Parse(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			opts := htn.Options{}
			if tc.disabled != "" {
				opts.Disabled = func(op string) bool { return op == tc.disabled }
			}
			for _, first := range []bool{false, true} {
				opts.FirstOnly = first
				res, err := prog.Plan(context.Background(), tc.goal, opts)
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Plans) != 0 {
					t.Fatalf("got %d plans, want none", len(res.Plans))
				}
				if diff := cmp.Diff(tc.want, res.Failure); diff != "" {
					t.Errorf("FirstOnly %v: failure (-want +got):\n%s", first, diff)
				}
			}
		})
	}
}

// A search that finds a plan reports no failure, however many branches
// failed on the way.
func TestFailureNotWithPlans(t *testing.T) {
	prog, err := htn.Parse(`t :- if(nosuch), do(). t :- if(), do(a). a :- del(), add(x).`)
	if err != nil {
		t.Fatal(err)
	}
	for _, first := range []bool{false, true} {
		res, err := prog.Plan(context.Background(), "t", htn.Options{FirstOnly: first})
		if err != nil || len(res.Plans) != 1 {
			t.Fatalf("got %v, %v; want one plan", res, err)
		}
		if res.Failure != nil {
			t.Errorf("FirstOnly %v: got failure %v, want none", first, res.Failure)
		}
	}
}

func TestNoPlanError(t *testing.T) {
	prog, err := htn.Parse(`at(home). go(?to) :- if(at(?from), road(?from, ?to)), do().`)
	if err != nil {
		t.Fatal(err)
	}
	res, err := prog.Plan(context.Background(), "go(park)", htn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var e error = &htn.NoPlanError{Goal: "go(park)", Failure: res.Failure}
	if !errors.Is(e, htn.ErrNoPlan) {
		t.Errorf("errors.Is(%v, ErrNoPlan) is false", e)
	}
	want := "htn: no plan for go(park): the search got furthest at task go(park) at depth 1: method go(?to) (line 1) failed its condition at road(home,park) (goal 2 of its if())"
	if got := e.Error(); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// The trace keeps at most TraceLimit events and counts the others.
func TestTraceLimit(t *testing.T) {
	prog, err := htn.Parse(`n(1). n(2). n(3). n(4). t :- if(n(?x)), do(p(?x)). p(?x) :- del(), add(q(?x)).`)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		opts        htn.Options
		kept        int
		dropped     int64
		lastPrinted string
	}{
		{htn.Options{}, 0, 0, ""},
		{htn.Options{Trace: true}, 14, 0, "[3] plan 4"},
		{htn.Options{Trace: true, TraceLimit: 5}, 5, 9, "[3] plan 1"},
		{htn.Options{Trace: true, FirstOnly: true}, 5, 0, "[3] plan 1"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%+v", tc.opts), func(t *testing.T) {
			res, err := prog.Plan(context.Background(), "t", tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Trace) != tc.kept || res.TraceDropped != tc.dropped {
				t.Fatalf("got %d events kept and %d dropped, want %d and %d:\n%v", len(res.Trace), res.TraceDropped, tc.kept, tc.dropped, res.Trace)
			}
			if tc.kept > 0 {
				if got := res.Trace[tc.kept-1].String(); got != tc.lastPrinted {
					t.Errorf("last event %q, want %q", got, tc.lastPrinted)
				}
			}
		})
	}
}

// The events a trace keeps count against the memory budget: a budget the
// search fits into runs out once the search is traced.
func TestTraceMemoryBudget(t *testing.T) {
	prog, err := htn.Parse(`count(0) :- if(), do().
count(?n) :- if(>(?n, 0)), do(step(?n), count(-(?n, 1))).
step(?n) :- del(), add(did(?n)).`)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := prog.Plan(context.Background(), "count(300)", htn.Options{FirstOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	traced, err := prog.Plan(context.Background(), "count(300)", htn.Options{FirstOnly: true, Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	if traced.Stats.PeakMemory <= plain.Stats.PeakMemory {
		t.Fatalf("peak memory traced %d, untraced %d: the trace is not counted", traced.Stats.PeakMemory, plain.Stats.PeakMemory)
	}
	budget := htn.Budget{Memory: plain.Stats.PeakMemory}
	if _, err := prog.Plan(context.Background(), "count(300)", htn.Options{FirstOnly: true, Budget: budget}); err != nil {
		t.Fatalf("untraced within %d bytes: %v", budget.Memory, err)
	}
	_, err = prog.Plan(context.Background(), "count(300)", htn.Options{FirstOnly: true, Budget: budget, Trace: true})
	if !errors.Is(err, htn.ErrBudgetExceeded) {
		t.Fatalf("traced within %d bytes: got %v, want ErrBudgetExceeded", budget.Memory, err)
	}
}

// Events print the text of long terms cut to 256 bytes.
func TestTraceClipsTerms(t *testing.T) {
	long := strings.Repeat("a", 1000)
	prog, err := htn.Parse(`t(?x) :- if(), do(). `)
	if err != nil {
		t.Fatal(err)
	}
	res, err := prog.Plan(context.Background(), "t("+long+")", htn.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Trace[0].Task; len(got) > 256 || !strings.HasPrefix(got, "t(aaa") || !strings.HasSuffix(got, "…") {
		t.Errorf("task %q (%d bytes), want t(aaa… of at most 256 bytes", got, len(got))
	}
}
