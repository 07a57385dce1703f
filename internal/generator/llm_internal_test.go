package generator

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/schemas"
)

// The plan schema the model is given is one document, with only the
// definitions a plan reaches and nothing of the planner's own, and it
// still accepts the plans the real schema does.
func TestBundledPlanSchema(t *testing.T) {
	s, err := bundledPlanSchema()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(s)
	text := string(b)
	for _, gone := range []string{"common.schema.json", "reuseFrom", `"token"`, `"planState"`, `"$id"`} {
		if strings.Contains(text, gone) {
			t.Errorf("the bundled schema holds %s", gone)
		}
	}
	for _, kept := range []string{`"tool"`, `"toolId"`, `"skill"`, `"gate"`, `"retryPolicy"`, `"timeoutMs"`} {
		if !strings.Contains(text, kept) {
			t.Errorf("the bundled schema lacks the definition %s", kept)
		}
	}
	v, err := schemas.Compile("bundled-plan", b)
	if err != nil {
		t.Fatal(err)
	}
	doc := []byte(`{"tools":[{"toolId":"a","skill":"echo","input":{"x":1},"retryPolicy":{"maxAttempts":2},"verify":{"type":"nonEmpty"}},
		{"toolId":"b","skill":"echo","dependencies":["a"],"input":{"y":{"$ref":"a#/x"}}}]}`)
	if err := v.Validate(doc); err != nil {
		t.Errorf("a valid plan: %v", err)
	}
	if _, err := plan.Decode(doc); err != nil {
		t.Fatalf("the plan used here is not valid planbus: %v", err)
	}
	if err := v.Validate([]byte(`{"tools":[{"toolId":"a","skill":"no.such skill"}]}`)); err == nil {
		t.Error("the bundled schema takes a skill name the real one refuses")
	}
	t.Logf("bundled plan schema: %d bytes", len(b))
}
