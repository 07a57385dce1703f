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
	allowed := map[string]bool{"len": true}
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
