package htn_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/planbus/planbus/internal/htn"
)

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name      string
		src       string
		line, col int
		msg       string
	}{
		{"missing paren", "at(downtown).\nwalk(?a) :- del(at(?a), add(at(x)).", 2, 35, `expected ')' after arguments of "del"`},
		{"missing dot", "at(downtown)", 1, 13, "expected '.' at end of statement"},
		{"unterminated comment", "at(x).\n/* never closed", 2, 1, "unterminated /* comment"},
		{"unterminated quote", "name('abc).", 1, 6, "unterminated quoted atom"},
		{"unterminated string", `say("hi).`, 1, 5, "unterminated string"},
		{"bad list", "l([a, b).", 1, 8, "expected ']'"},
		{"no term", "p(, a).", 1, 3, "expected a term"},
		{"variable name", "p(?).", 1, 3, "expected a variable name"},
		{"do before if", "m :- do(a), if(b).", 1, 1, "do() must follow if()"},
		{"add without del", "o :- add(a).", 1, 1, "add() must follow del()"},
		{"del in method", "m :- if(a), del(b), do(c).", 1, 1, "del() must come first"},
		{"two ifs", "m :- if(a), if(b), do(c).", 1, 1, "two if() clauses"},
		{"duplicate fact", "at(x).\nat(x).", 2, 1, "duplicate fact at(x)"},
		{"deep nesting", strings.Repeat("f(", 5000) + "a" + strings.Repeat(")", 5000) + ".", 1, 8194, "nested more than 4096 levels"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := htn.Parse(tc.src)
			var pe *htn.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse: got %v, want a *ParseError", err)
			}
			if !errors.Is(err, htn.ErrSyntax) {
				t.Errorf("errors.Is(err, ErrSyntax) = false for %v", err)
			}
			if pe.Line != tc.line || pe.Column != tc.col {
				t.Errorf("position: got %d:%d, want %d:%d (%v)", pe.Line, pe.Column, tc.line, tc.col, err)
			}
			if !strings.Contains(pe.Msg, tc.msg) {
				t.Errorf("message: got %q, want it to contain %q", pe.Msg, tc.msg)
			}
			if !strings.HasPrefix(err.Error(), "htn: ") {
				t.Errorf("error %q lacks the htn: prefix", err)
			}
		})
	}
}

// TestLexicalSyntax checks each lexical feature of the InductorHtn
// language (comments, atoms, variables, strings, numbers, lists) through
// the way terms print back.
func TestLexicalSyntax(t *testing.T) {
	prog := `
% line comment
/* block
   comment */ a(travel-to). a(King1-1). a(=<). a(\==). a(!).
a('Hi there'). a("quoted string"). a(-3). a(2.50). a(+4). a([]). a([x, y]).
a([h | t]). a(f()). a('.'(foo)). a(_). a(?V).
`
	p, err := htn.Parse(prog)
	if err != nil {
		t.Fatal(err)
	}
	ans, err := p.Query(context.Background(), "a(?X)", htn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := htn.FormatQuery(ans)
	want := `((?X = travel-to), (?X = King1-1), (?X = =<), (?X = \==), (?X = !), (?X = Hi there), (?X = "quoted string"), (?X = -3), (?X = 2.50), (?X = 4), (?X = []), (?X = [x,y]), (?X = [h,t), (?X = f), (?X = .(foo)), (), ())`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestGoalsStatement(t *testing.T) {
	p, err := htn.Parse("goals(a(1), b).")
	if err != nil {
		t.Fatal(err)
	}
	g, ok := p.Goals()
	if !ok || g != "a(1), b" {
		t.Errorf("Goals() = %q, %v; want %q, true", g, ok, "a(1), b")
	}
	if _, ok := mustParse(t, "x.").Goals(); ok {
		t.Error("Goals() reported a goal list for a program without goals()")
	}
}

func mustParse(t testing.TB, src string) *htn.Program {
	t.Helper()
	p, err := htn.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func FuzzParse(f *testing.F) {
	seeds := []string{
		"at(downtown).",
		"travel-to(?q) :- if(at(?p), walking-distance(?p, ?q)), do(walk(?p, ?q)).",
		"walk(?here, ?there) :- del(at(?here)), add(at(?there)).",
		"m :- else, anyOf, if(u(?x)), do(try(a(?x)), b).",
		"s :- hidden, del(), add(s).",
		"l([a, b | ?T]). q('a b', \"c\", -3, 2.50, +4, _).",
		"/* c */ % d\nx :- .",
		"[a, b].",
		"f(((((((",
		"'unterminated",
	}
	for _, s := range seeds {
		f.Add(s, "a(?X), b")
	}
	f.Fuzz(func(t *testing.T, src, goal string) {
		p, err := htn.Parse(src)
		if err != nil {
			var pe *htn.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse returned %T %v, want *ParseError", err, err)
			}
			return
		}
		// A parsed program must survive a bounded plan and query.
		opts := htn.Options{FirstOnly: true, Budget: htn.Budget{Memory: 1 << 20, Steps: 10000, Nodes: 1000}}
		_, perr := p.Plan(context.Background(), goal, opts)
		_, _ = p.Query(context.Background(), goal, opts)
		// Traced, a search that ends without a plan says how far it got,
		// and one with a plan does not.
		traced := opts
		traced.Trace, traced.TraceLimit = true, 100
		if res, err := p.Plan(context.Background(), goal, traced); err == nil {
			if (len(res.Plans) == 0) != (res.Failure != nil) {
				t.Fatalf("goal %q: %d plans, failure %v", goal, len(res.Plans), res.Failure)
			}
			if res.Failure != nil {
				_ = res.Failure.String()
			}
			if len(res.Trace) > 100 {
				t.Fatalf("goal %q: %d trace events, limit 100", goal, len(res.Trace))
			}
			for _, ev := range res.Trace {
				_ = ev.String()
			}
		}
		// CheckGoal, which the planner's endpoint runs, refuses exactly
		// the goals Plan refuses as malformed.
		var pe *htn.ParseError
		if cerr := htn.CheckGoal(goal); (cerr != nil) != errors.As(perr, &pe) {
			t.Fatalf("goal %q: CheckGoal says %v, Plan %v", goal, cerr, perr)
		}
	})
}
