package skill_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/planbus/planbus/skill"
)

func TestChainOrder(t *testing.T) {
	var trace []string
	record := func(name string) skill.Middleware {
		return func(next skill.Handler) skill.Handler {
			return skill.HandlerFunc(func(ctx context.Context, call *skill.Call) (skill.Result, error) {
				trace = append(trace, name+" in")
				res, err := next.Handle(ctx, call)
				trace = append(trace, name+" out")
				return res, err
			})
		}
	}
	h := skill.HandlerFunc(func(context.Context, *skill.Call) (skill.Result, error) {
		trace = append(trace, "handler")
		return skill.Result{}, errors.New("done")
	})
	if _, err := skill.Chain(h, record("a"), record("b"), record("c")).Handle(t.Context(), newCall("demo", `{}`)); err == nil {
		t.Fatal("got no error, want the handler's")
	}
	want := []string{"a in", "b in", "c in", "handler", "c out", "b out", "a out"}
	if diff := cmp.Diff(want, trace); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}

	trace = nil
	if _, err := skill.Chain(h).Handle(t.Context(), newCall("demo", `{}`)); err == nil {
		t.Fatal("got no error, want the handler's")
	}
	if diff := cmp.Diff([]string{"handler"}, trace); diff != "" {
		t.Errorf("no middleware (-want +got):\n%s", diff)
	}
}
