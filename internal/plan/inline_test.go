package plan_test

import (
	"encoding/json"
	"testing"

	"github.com/planbus/planbus/internal/plan"
)

func TestInlineRefs(t *testing.T) {
	outputs := map[string]json.RawMessage{"A": json.RawMessage(`{"city":"Lisbon","n":[1,2]}`), "gone": nil}
	for _, c := range []struct{ in, want string }{
		{`{"x":1}`, `{"x":1}`},
		{`{"c":{"$ref":"A#/city"},"b":{"$ref":"B"}}`, `{"b":{"$ref":"B"},"c":"Lisbon"}`},
		{`{"all":{"$ref":"A"},"second":[{"$ref":"A#/n/1"}]}`, `{"all":{"city":"Lisbon","n":[1,2]},"second":[2]}`},
		{`{"none":{"$ref":"A#/nothing"},"empty":{"$ref":"gone"}}`, `{"empty":null,"none":null}`},
	} {
		got, err := plan.InlineRefs(json.RawMessage(c.in), outputs)
		if err != nil || string(got) != c.want {
			t.Errorf("InlineRefs(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	if _, err := plan.InlineRefs(json.RawMessage(`{"x":{"$ref":"#/nothing"}}`), outputs); err == nil {
		t.Error("a reference that names no tool was inlined")
	}
}
