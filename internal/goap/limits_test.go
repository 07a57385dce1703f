package goap_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/planbus/planbus/internal/goap"
)

// limitsDomain is a one-action domain whose action costs cost, over a
// string fact s holding a KiB and a number n.
func limitsDomain(t *testing.T, cost string) *goap.Domain {
	t.Helper()
	doc, _ := json.Marshal(map[string]any{
		"name":  "limits",
		"facts": map[string]any{"s": strings.Repeat("x", 1024), "n": 0, "done": false},
		"derived": map[string]any{
			"label": `s[0:1] + "-" + string(n)`, // strings may be joined, within the bound
		},
		"actions": []any{map[string]any{"name": "act", "effects": map[string]any{"done": true}, "cost": cost,
			"requires": `label == "x-0"`}},
		"goals": []any{map[string]any{"name": "g", "conditions": map[string]any{"done": true}}},
	})
	d, err := goap.Decode(doc)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// doubling is an expression that doubles start twenty times, each time
// with double (X standing for the string so far): a thousand-fold a
// million, unbounded.
func doubling(start, double string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "let a0 = %s; ", start)
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&b, "let a%d = %s; ", i, strings.ReplaceAll(double, "X", fmt.Sprintf("a%d", i-1)))
	}
	b.WriteString("len(a20) > 0 ? 1 : 2")
	return b.String()
}

// What one evaluation of an expression from a request may build is
// bounded: strings joined past goap.MaxString, a string fact longer than
// it and a range past the VM's budget are evaluation errors naming where,
// not a gigabyte taken from the node (the twenty doublings of a KiB would
// be one).
func TestExpressionsCannotExhaustMemory(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ name, cost, want string }{
		{"strings doubled", doubling("s", "X + X"), "expressions make strings of at most 16384"},
		{"strings doubled through an untyped value", doubling(`(n > 0 ? 1 : s)`, "X + X"), "expressions make strings of at most 16384"},
		// string() of an array would join its elements.
		{"strings doubled by string()", doubling("s", "string([X, X])"), "string() takes a number, a truth value or a string"},
		{"a long range", "len(1..100000) > 0 ? 1 : 2", "memory budget exceeded"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := goap.Plan(ctx, limitsDomain(t, c.cost), nil, "g", goap.Options{})
			var ee *goap.EvalError
			if !errors.As(err, &ee) || !strings.Contains(err.Error(), c.want) || !strings.Contains(ee.Where, "act") {
				t.Fatalf("plan: %v; want an evaluation error of action act containing %q", err, c.want)
			}
		})
	}
	// The same domain with a cost that stays in bounds plans.
	r, err := goap.Plan(ctx, limitsDomain(t, `len(s + s) > 0 ? 1 : 2`), nil, "g", goap.Options{})
	if err != nil || len(r.Steps) != 1 || r.Cost != 1 {
		t.Fatalf("bounded cost: %+v, %v; want the one step at cost 1", r, err)
	}
	// A state whose string fact is longer than a fact may hold is refused.
	_, err = goap.Plan(ctx, limitsDomain(t, "1"), goap.State{"s": strings.Repeat("y", goap.MaxString+1)}, "g", goap.Options{})
	if !errors.Is(err, goap.ErrInvalidState) || !strings.Contains(err.Error(), "a fact holds at most 16384") {
		t.Fatalf("long fact: %v; want ErrInvalidState naming the limit", err)
	}
}
