package safeexpr

import (
	"strings"
	"testing"

	"github.com/expr-lang/expr"
)

func TestPlusBoundsWhatItJoins(t *testing.T) {
	if got, err := Plus("ab", "c"); err != nil || got != "abc" {
		t.Fatalf("Plus of short strings: %v, %v", got, err)
	}
	if got, err := Plus(1, 2.5); err != nil || got != 3.5 {
		t.Fatalf("Plus of numbers: %v, %v", got, err)
	}
	long := strings.Repeat("x", MaxString)
	if _, err := Plus(long, "y"); err == nil || !strings.Contains(err.Error(), "at most 16384") {
		t.Fatalf("Plus past MaxString: %v, want an error naming the bound", err)
	}
}

func TestOptionsAllowOnlyTheBuiltinsNamed(t *testing.T) {
	allowed := Rules{Builtins: map[string]bool{"len": true}}
	if why := Refused(`len(upper("a")) > 0`, allowed); !strings.Contains(why, "upper is not available here (available: len)") {
		t.Fatalf("Refused: %q", why)
	}
	if why := Refused(`len("a") > 0`, allowed); why != "" {
		t.Fatalf("Refused of an allowed call: %q", why)
	}
	// Refused is for the message; the options themselves refuse the call.
	if _, err := expr.Compile(`upper("a")`, append(Options(allowed), expr.Env(map[string]any{}))...); err == nil {
		t.Fatal("a builtin not allowed compiled")
	}
	p, err := expr.Compile(`s + s`, append(Options(allowed), expr.Env(map[string]any{"s": ""}))...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := expr.Run(p, map[string]any{"s": strings.Repeat("x", MaxString/2+1)}); err == nil {
		t.Fatal("a + of strings past MaxString ran")
	}
}

func TestRefusedNamesWhatRulesDoNotAllow(t *testing.T) {
	flat := Rules{Builtins: map[string]bool{"all": true, "len": true}, Flat: true}
	for _, c := range []struct {
		src   string
		rules Rules
		want  string
	}{
		{`"a" matches s`, Rules{}, "matches takes a constant pattern"},
		{`s matches "a+"`, Rules{}, ""},
		{`len(1..10) > 0`, flat, "ranges (a..b) are not available"},
		{`len(1..10) > 0`, Rules{Builtins: flat.Builtins}, ""},
		{`all(xs, {all(xs, {true})})`, flat, "a predicate inside another"},
		{`all(xs, {# > 0}) && all(xs, {# < 9})`, flat, ""},
	} {
		if got := Refused(c.src, c.rules); (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("Refused(%q) = %q, want %q", c.src, got, c.want)
		}
	}
}

// The optimizer would turn sum of an array literal into a + that Plus
// never sees, and string() of an array would join its elements: neither
// makes a long string.
func TestNoLongStringThroughSumOrString(t *testing.T) {
	r := Rules{Builtins: map[string]bool{"sum": true, "string": true, "len": true}}
	env := map[string]any{"s": strings.Repeat("x", MaxString/2+1)}
	for _, src := range []string{`len(sum([s, s])) > 0`, `len(string([s, s])) > 0`, `len(string({"a": s})) > 0`} {
		p, err := expr.Compile(src, append(Options(r), expr.Env(env))...)
		if err != nil {
			continue // refused when compiled: as good
		}
		if out, err := expr.Run(p, env); err == nil {
			t.Errorf("%s ran: %v", src, out)
		}
	}
	p, err := expr.Compile(`string(1.5) + string(true) + string(s)`, append(Options(r), expr.Env(env))...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := expr.Run(p, map[string]any{"s": "x"}); err != nil {
		t.Errorf("string of scalars: %v", err)
	}
}
