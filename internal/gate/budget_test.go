package gate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// bombOutput is an echo of {"a":[1 × 300,000]}: under 1 MB.
func bombOutput() json.RawMessage {
	var b strings.Builder
	b.WriteString(`{"a":[`)
	for i := range 300_000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('1')
	}
	b.WriteString(`]}`)
	return json.RawMessage(b.String())
}

// bombGate is 20 gates, each an expression of 110 passes over output.a:
// about 4.6 s of work each when nothing meters it (issue 23).
func bombGate(t testing.TB) *Gate {
	term := "count(output.a, # == 2)"
	terms := make([]string, 110)
	for i := range terms {
		terms[i] = term
	}
	one := map[string]any{"type": "expr", "expr": strings.Join(terms, " + ") + " >= 0"}
	gates := make([]any, 20)
	for i := range gates {
		gates[i] = one
	}
	raw, err := json.Marshal(map[string]any{"type": "all", "gates": gates})
	if err != nil {
		t.Fatal(err)
	}
	g, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestAGateBombStopsWithinItsBudget(t *testing.T) {
	g, out := bombGate(t), bombOutput()
	ok, reason, err := g.CheckWithin(out, DefaultSteps)
	if ok || !errors.Is(err, ErrBudget) {
		t.Fatalf("CheckWithin = %v, %q, %v; want a failure matching ErrBudget", ok, reason, err)
	}
	for _, want := range []string{"gate gates/0 (expr count(output.a, # == 2)", "budget of 4,000,000 steps"} {
		if !strings.Contains(reason, want) {
			t.Errorf("reason %q does not say %q", reason, want)
		}
	}
	// The verdict is the input's alone: a dispatcher that applies the
	// result again, elsewhere, gets the same.
	ok2, reason2, err2 := g.CheckWithin(out, DefaultSteps)
	if ok2 != ok || reason2 != reason || (err2 == nil) != (err == nil) {
		t.Errorf("second check = %v, %q, %v; the first was %v, %q, %v", ok2, reason2, err2, ok, reason, err)
	}
	// Check is CheckWithin at the default budget.
	if ok, why := g.Check(out); ok || why != reason {
		t.Errorf("Check = %v, %q; want false, %q", ok, why, reason)
	}
}

func TestGateBudgetCharges(t *testing.T) {
	big := bombOutput()
	tests := []struct {
		name   string
		gate   string
		output json.RawMessage
		steps  int64
		over   bool
		where  string
	}{
		{"a cheap gate passes within a small budget", `{"type":"expr","expr":"len(output.a) > 0"}`, json.RawMessage(`{"a":[1,2,3]}`), 100, false, ""},
		{"one pass of a predicate costs its elements", `{"type":"expr","expr":"all(output.a, # == 1)"}`, big, 250_000, true, "the gate"},
		{"one pass fits in a budget of two", `{"type":"expr","expr":"all(output.a, # == 1)"}`, big, 600_000, false, ""},
		{"a builtin is charged for its argument", `{"type":"expr","expr":"sum(output.a) + sum(output.a) + sum(output.a) > 0"}`, big, 600_000, true, "the gate"},
		{"in is charged for its array", `{"type":"expr","expr":"2 in output.a or 3 in output.a or 4 in output.a"}`, big, 600_000, true, "the gate"},
		{"contains is charged for the output's text", `{"type":"all","gates":[{"type":"notContains","value":"x"},{"type":"notContains","value":"y"},{"type":"notContains","value":"z"}]}`, big, 80_000, true, "gate gates/2"},
		{"matches costs more than contains", `{"type":"matches","path":"","pattern":"x"}`, big, 100_000, true, "the gate"},
		{"equals is charged for its value", `{"type":"equals","path":"/a","value":[1,1,1,1,1,1,1,1]}`, json.RawMessage(`{"a":[1]}`), 5, true, "the gate"},
		{"nested gates are named by their place", `{"type":"all","gates":[{"type":"nonEmpty"},{"type":"all","gates":[{"type":"exists","path":"/a"},{"type":"expr","expr":"count(output.a, # == 1) > 0"}]}]}`, big, 100_000, true, "gate gates/1/gates/1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := Parse([]byte(tt.gate))
			if err != nil {
				t.Fatal(err)
			}
			ok, reason, err := g.CheckWithin(tt.output, tt.steps)
			if over := errors.Is(err, ErrBudget); over != tt.over {
				t.Fatalf("over budget = %v (%v, %q), want %v", over, err, reason, tt.over)
			}
			if tt.over && (ok || !strings.Contains(reason, tt.where+" (")) {
				t.Errorf("got %v, %q; want a failure at %s", ok, reason, tt.where)
			}
		})
	}
}

func TestReservedNamesAreRefused(t *testing.T) {
	for _, src := range []string{"__meter == nil", "__step(__meter, 1) > 0", "__plus('a', 'b') == 'ab'"} {
		_, err := Parse([]byte(`{"type":"expr","expr":` + quote(src) + `}`))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "planbus's own") {
			t.Errorf("%s: err = %v; want it refused as a reserved name", src, err)
		}
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// BenchmarkGateBomb is the time one check of the bomb takes at the
// default budget: what a dispatcher spends on such a result.
func BenchmarkGateBomb(b *testing.B) {
	g, out := bombGate(b), bombOutput()
	for b.Loop() {
		if ok, _ := g.Check(out); ok {
			b.Fatal("the bomb passed")
		}
	}
}

// BenchmarkGatePass is one predicate pass over 300,000 elements, as a
// user's gate over a big output might make, metered.
func BenchmarkGatePass(b *testing.B) {
	g, err := Parse([]byte(`{"type":"expr","expr":"all(output.a, # == 1)"}`))
	if err != nil {
		b.Fatal(err)
	}
	out := bombOutput()
	for b.Loop() {
		if ok, why := g.Check(out); !ok {
			b.Fatal(why)
		}
	}
}
