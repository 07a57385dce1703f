package goap

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// arbiterDomain has three goals whose utilities are facts, so a test sets
// them directly.
const arbiterDomain = `{"name": "arb",
	"facts": {"ua": 0, "ub": 0, "uc": 0, "done_a": false, "done_b": false, "done_c": false, "c_ok": true},
	"actions": [{"name": "noop"}],
	"goals": [
		{"name": "a", "conditions": {"done_a": true}, "utility": "ua", "cooldownMs": 1000},
		{"name": "b", "conditions": {"done_b": true}, "utility": "ub", "cooldownMs": 2000},
		{"name": "c", "conditions": {"done_c": true}, "utility": "uc", "valid": "c_ok", "cooldownMs": 0}
	]}`

func TestArbiter(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	type step struct {
		do     string // select (default), running, idle, failed:<goal>, clear
		state  State
		at     time.Duration // since t0
		goal   string
		reason Reason
	}
	tests := []struct {
		name  string
		cfg   ArbiterConfig
		steps []step
	}{
		{"nothing eligible", ArbiterConfig{}, []step{
			{state: State{}, reason: ReasonNone},
			{state: State{"ua": 10, "done_a": true}, reason: ReasonNone},
		}},
		{"best, ties to the first listed", ArbiterConfig{}, []step{
			{state: State{"ua": 10, "ub": 20, "uc": 20}, goal: "b", reason: ReasonBest},
		}},
		{"hysteresis between plans", ArbiterConfig{}, []step{
			{state: State{"ua": 50, "ub": 40}, goal: "a", reason: ReasonBest},
			{state: State{"ua": 50, "ub": 51}, goal: "a", reason: ReasonHysteresis},
			{state: State{"ua": 50, "ub": 59.9}, goal: "a", reason: ReasonHysteresis}, // short of 20% more
			{state: State{"ua": 50, "ub": 60}, goal: "b", reason: ReasonSwitch},       // exactly 20% more is enough
			{state: State{"ua": 71.9, "ub": 60}, goal: "b", reason: ReasonHysteresis}, // no thrashing back
			{state: State{"ua": 59, "ub": 60}, goal: "b", reason: ReasonCurrent},
		}},
		{"no hysteresis", ArbiterConfig{Hysteresis: -1}, []step{
			{state: State{"ua": 50, "ub": 40}, goal: "a", reason: ReasonBest},
			{state: State{"ua": 50, "ub": 50.5}, goal: "b", reason: ReasonSwitch},
		}},
		{"preemption while running", ArbiterConfig{}, []step{
			{state: State{"ua": 80}, goal: "a", reason: ReasonBest},
			{do: "running"},
			{state: State{"ua": 80, "ub": 110}, goal: "a", reason: ReasonHysteresis}, // > 20% but not > +30
			{state: State{"ua": 80, "ub": 111}, goal: "b", reason: ReasonPreempt},
			{state: State{"ua": 80, "ub": 111}, goal: "b", reason: ReasonCurrent},
		}},
		{"never preempt", ArbiterConfig{Preemption: -1}, []step{
			{state: State{"ua": 80}, goal: "a", reason: ReasonBest},
			{do: "running"},
			{state: State{"ua": 80, "ub": 1000}, goal: "a", reason: ReasonHysteresis},
			{do: "idle"},
			{state: State{"ua": 80, "ub": 1000}, goal: "b", reason: ReasonSwitch},
		}},
		{"current satisfied or invalid is replaced", ArbiterConfig{}, []step{
			{state: State{"uc": 90, "ua": 10}, goal: "c", reason: ReasonBest},
			{do: "running"},
			{state: State{"uc": 90, "ua": 10, "c_ok": false}, goal: "a", reason: ReasonReplace},
			{state: State{"ua": 10, "ub": 5, "done_a": true}, goal: "b", reason: ReasonReplace},
			{state: State{"ub": 0}, reason: ReasonNone},
		}},
		{"cooldown after failure", ArbiterConfig{}, []step{
			{state: State{"ua": 50, "ub": 10}, goal: "a", reason: ReasonBest},
			{do: "failed:a", at: time.Second},
			{state: State{"ua": 50, "ub": 10}, at: time.Second, goal: "b", reason: ReasonBest},
			{state: State{"ua": 50, "ub": 10}, at: 1999 * time.Millisecond, goal: "b", reason: ReasonCurrent},
			{state: State{"ua": 50, "ub": 10}, at: 2 * time.Second, goal: "a", reason: ReasonSwitch},
		}},
		{"cooldown of the current goal while it stays current", ArbiterConfig{}, []step{
			{state: State{"ub": 50, "ua": 10}, goal: "b", reason: ReasonBest},
			{do: "failed:b"},
			{state: State{"ub": 50}, at: time.Second, reason: ReasonNone},
			{state: State{"ub": 50}, at: 2 * time.Second, goal: "b", reason: ReasonBest},
		}},
		{"zero cooldown", ArbiterConfig{}, []step{
			{state: State{"uc": 5}, goal: "c", reason: ReasonBest},
			{do: "failed:c"},
			{state: State{"uc": 5}, goal: "c", reason: ReasonBest},
		}},
		{"clear", ArbiterConfig{}, []step{
			{state: State{"ua": 50, "ub": 55}, goal: "b", reason: ReasonBest},
			{do: "clear"},
			{state: State{"ua": 50, "ub": 45}, goal: "a", reason: ReasonBest},
		}},
	}
	d := mustDecode(t, arbiterDomain)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := NewArbiter(d, tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tt.steps {
				now := t0.Add(s.at)
				switch {
				case s.do == "running":
					a.SetRunning(true)
				case s.do == "idle":
					a.SetRunning(false)
				case s.do == "clear":
					a.Clear()
				case strings.HasPrefix(s.do, "failed:"):
					if err := a.Failed(strings.TrimPrefix(s.do, "failed:"), now); err != nil {
						t.Fatal(err)
					}
				default:
					sel, err := a.Select(s.state, now)
					if err != nil {
						t.Fatal(err)
					}
					if sel.Goal != s.goal || sel.Reason != s.reason {
						t.Fatalf("step %d: got %s (%s: %s), want %s (%s)", i, sel.Goal, sel.Reason, sel.Detail, s.goal, s.reason)
					}
					if cur, _ := a.Current(); cur != sel.Goal {
						t.Fatalf("step %d: current %q, selected %q", i, cur, sel.Goal)
					}
				}
			}
		})
	}
}

func TestArbiterDetail(t *testing.T) {
	a, _ := NewArbiter(mustDecode(t, arbiterDomain), ArbiterConfig{})
	t0 := time.Unix(0, 0)
	sel, _ := a.Select(State{"ua": 50, "ub": 40}, t0)
	if want := "best is a (50)"; sel.Detail != want || sel.Utility != 50 {
		t.Errorf("got %q utility %v, want %q 50", sel.Detail, sel.Utility, want)
	}
	sel, _ = a.Select(State{"ua": 50, "ub": 55}, t0)
	if want := "b (55) does not beat a (50) by 20%"; sel.Detail != want {
		t.Errorf("got %q, want %q", sel.Detail, want)
	}
	sel, _ = a.Select(State{"ua": 50, "ub": 55, "done_a": true}, t0)
	if want := "current goal a is satisfied; best is b (55)"; sel.Detail != want {
		t.Errorf("got %q, want %q", sel.Detail, want)
	}
}

func TestArbiterReport(t *testing.T) {
	d := mustDecode(t, arbiterDomain)
	a, _ := NewArbiter(d, ArbiterConfig{})
	t0 := time.Unix(100, 0)
	if err := a.Failed("b", t0); err != nil {
		t.Fatal(err)
	}
	got, err := a.Report(State{"ua": 3, "ub": 7, "uc": 9, "c_ok": false, "done_a": true}, t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := []GoalStatus{
		{Goal: "a", Utility: 3, Valid: true, Satisfied: true},
		{Goal: "b", Utility: 7, Valid: true, CoolingUntil: t0.Add(2 * time.Second)},
		{Goal: "c", Utility: 0, Valid: false},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
}

// SelectReport chooses as Select does, from the same state and memory,
// and returns the report the choice was made on: every goal's utility and
// why it is or is not eligible.
func TestArbiterSelectReport(t *testing.T) {
	d := mustDecode(t, arbiterDomain)
	t0 := time.Unix(100, 0)
	states := []State{
		{"ua": 50, "ub": 40},
		{"ua": 50, "ub": 55},
		{"ua": 50, "ub": 70, "uc": 9, "c_ok": false},
		{"ua": 50, "ub": 70, "done_b": true},
		{"done_a": true, "done_b": true, "done_c": true},
	}
	plain, _ := NewArbiter(d, ArbiterConfig{})
	reporting, _ := NewArbiter(d, ArbiterConfig{})
	for i, s := range states {
		now := t0.Add(time.Duration(i) * time.Second)
		if i == 2 {
			_ = plain.Failed("a", now)
			_ = reporting.Failed("a", now)
		}
		want, err := plain.Select(s, now)
		if err != nil {
			t.Fatal(err)
		}
		wantReport, err := reporting.Report(s, now)
		if err != nil {
			t.Fatal(err)
		}
		got, report, err := reporting.SelectReport(s, now)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("state %d: SelectReport chose %+v, Select %+v", i, got, want)
		}
		if diff := cmp.Diff(wantReport, report); diff != "" {
			t.Errorf("state %d: report (-Report +SelectReport):\n%s", i, diff)
		}
		if diff := cmp.Diff(plain.State(), reporting.State()); diff != "" {
			t.Errorf("state %d: memory (-Select +SelectReport):\n%s", i, diff)
		}
	}
	if _, _, err := reporting.SelectReport(State{"ua": "x"}, t0); !errors.Is(err, ErrInvalidState) {
		t.Errorf("a mistyped fact: got %v, want ErrInvalidState", err)
	}
}

func TestArbiterStateRoundTrip(t *testing.T) {
	d := mustDecode(t, arbiterDomain)
	a, _ := NewArbiter(d, ArbiterConfig{})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := a.Select(State{"ua": 50, "ub": 10}, t0); err != nil {
		t.Fatal(err)
	}
	a.SetRunning(true)
	if err := a.Failed("b", t0); err != nil {
		t.Fatal(err)
	}
	doc, err := json.Marshal(a.State())
	if err != nil {
		t.Fatal(err)
	}
	var st ArbiterState
	if err := json.Unmarshal(doc, &st); err != nil {
		t.Fatal(err)
	}
	st.Cooldowns["gone"] = t0 // a goal the domain no longer has
	b, _ := NewArbiter(d, ArbiterConfig{})
	b.Restore(st)
	want := ArbiterState{Current: "a", Running: true, Cooldowns: map[string]time.Time{"b": t0.Add(2 * time.Second)}}
	if diff := cmp.Diff(want, b.State()); diff != "" {
		t.Errorf("restored state (-want +got):\n%s", diff)
	}
	// Running is restored: b needs the preemption margin.
	sel, _ := b.Select(State{"ua": 50, "uc": 75}, t0)
	if sel.Goal != "a" || sel.Reason != ReasonHysteresis {
		t.Errorf("got %s (%s), want a kept by the preemption margin", sel.Goal, sel.Reason)
	}
}

func TestArbiterErrors(t *testing.T) {
	d := mustDecode(t, `{"name": "d", "facts": {"s": {"type": "string"}, "n": 0}, "actions": [{"name": "a"}],
		"goals": [{"name": "g", "conditions": {"n": 1}, "utility": "len(s)"}]}`)
	a, _ := NewArbiter(d, ArbiterConfig{})
	if _, err := a.Select(State{}, time.Time{}); !errors.Is(err, ErrEval) || !strings.Contains(err.Error(), "goal g: utility") {
		t.Errorf("got %v, want an ErrEval naming goal g's utility", err)
	}
	if _, err := a.Select(State{"n": "x"}, time.Time{}); !errors.Is(err, ErrInvalidState) {
		t.Errorf("got %v, want ErrInvalidState", err)
	}
	if err := a.Failed("nope", time.Time{}); !errors.Is(err, ErrUnknownGoal) {
		t.Errorf("got %v, want ErrUnknownGoal", err)
	}
	if _, err := NewArbiter(d, ArbiterConfig{Preemption: nan()}); err == nil || !strings.Contains(err.Error(), "ArbiterConfig.Preemption") {
		t.Errorf("got %v, want an error naming ArbiterConfig.Preemption", err)
	}
}

func nan() float64 { return math.NaN() }

// TestArbiterBoundaries pins the default margins at their edges: between
// plans a goal takes over when its utility reaches the current one's ×
// 1.2; while a plan runs, only when it exceeds the current one's + 30.
func TestArbiterBoundaries(t *testing.T) {
	d := mustDecode(t, arbiterDomain)
	tests := []struct {
		current, best float64
		running       bool
		goal          string
		reason        Reason
	}{
		{50, 60, false, "b", ReasonSwitch},
		{50, 59.9, false, "a", ReasonHysteresis},
		{50, 55, false, "a", ReasonHysteresis},
		{3, 3.6, false, "b", ReasonSwitch}, // 3 × 1.2 is 3.5999999999999996 in binary
		{3, 3.59, false, "a", ReasonHysteresis},
		{0.1, 0.12, false, "b", ReasonSwitch},
		{80, 111, true, "b", ReasonPreempt},
		{80, 110, true, "a", ReasonHysteresis},
		{80, 110.5, true, "b", ReasonPreempt},
		{80, 96, true, "a", ReasonHysteresis}, // 20% more does not interrupt a running plan
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%v to %v", tt.current, tt.best)
		if tt.running {
			name += " running"
		}
		t.Run(name, func(t *testing.T) {
			a, _ := NewArbiter(d, ArbiterConfig{})
			t0 := time.Unix(0, 0)
			if sel, _ := a.Select(State{"ua": tt.current}, t0); sel.Goal != "a" {
				t.Fatalf("first selection %s (%s), want a", sel.Goal, sel.Reason)
			}
			a.SetRunning(tt.running)
			sel, err := a.Select(State{"ua": tt.current, "ub": tt.best}, t0)
			if err != nil {
				t.Fatal(err)
			}
			if sel.Goal != tt.goal || sel.Reason != tt.reason {
				t.Errorf("got %s (%s: %s), want %s (%s)", sel.Goal, sel.Reason, sel.Detail, tt.goal, tt.reason)
			}
		})
	}
}

// TestArbiterDefaultCooldown: a goal whose document gives no cooldownMs
// cools down for 5,000 ms after a failed plan, per goal.
func TestArbiterDefaultCooldown(t *testing.T) {
	d := mustDecode(t, `{"name": "d", "facts": {"x": false, "y": false}, "actions": [{"name": "a", "effects": {"x": true, "y": true}}],
		"goals": [{"name": "gx", "conditions": {"x": true}, "utility": 50}, {"name": "gy", "conditions": {"y": true}, "utility": 10}]}`)
	a, _ := NewArbiter(d, ArbiterConfig{})
	t0 := time.Unix(1000, 0)
	if err := a.Failed("gx", t0); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		at   time.Duration
		goal string
	}{
		{0, "gy"},
		{4999 * time.Millisecond, "gy"},
		{5000 * time.Millisecond, "gx"},
	} {
		a.Clear()
		sel, err := a.Select(State{}, t0.Add(tt.at))
		if err != nil {
			t.Fatal(err)
		}
		if sel.Goal != tt.goal {
			t.Errorf("%v after the failure: got %s (%s), want %s", tt.at, sel.Goal, sel.Detail, tt.goal)
		}
	}
}
