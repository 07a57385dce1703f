package gate

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/planbus/planbus"
)

func TestVerifyResult(t *testing.T) {
	g, err := Parse([]byte(`{"type":"contains","path":"/stdout","value":"ok"}`))
	if err != nil {
		t.Fatal(err)
	}
	good := planbus.ToolResult{ToolID: "a", State: planbus.ToolSucceeded, Output: json.RawMessage(`{"stdout":"ok"}`)}
	if got, ok, _ := VerifyResult(good, g, DefaultSteps); !ok || !cmp.Equal(got, good) {
		t.Errorf("passing result changed: %+v", got)
	}
	bad := planbus.ToolResult{ToolID: "a", State: planbus.ToolSucceeded, Output: json.RawMessage(`{"stdout":"no"}`)}
	got, ok, used := VerifyResult(bad, g, DefaultSteps)
	want := bad
	want.State = planbus.ToolFailed
	want.Error = &planbus.ErrorInfo{Code: CodeVerifyFailed, Category: planbus.CategoryTransient, Message: `verification failed: /stdout does not contain "ok"`}
	if ok || !cmp.Equal(got, want) {
		t.Errorf("refused result (-want +got):\n%s", cmp.Diff(want, got))
	}
	if used <= 0 || used > 10 {
		t.Errorf("a check of one short string used %d steps", used)
	}
	if bad.State != planbus.ToolSucceeded || bad.Error != nil {
		t.Error("VerifyResult changed its argument")
	}
	failedResult := planbus.ToolResult{ToolID: "a", State: planbus.ToolFailed, Error: &planbus.ErrorInfo{Code: "X", Category: planbus.CategoryPermanent}}
	if got, ok, _ := VerifyResult(failedResult, g, DefaultSteps); !ok || !cmp.Equal(got, failedResult) {
		t.Errorf("failed result changed: %+v", got)
	}
	if _, ok, _ := VerifyResult(bad, nil, DefaultSteps); !ok {
		t.Error("a nil gate refused a result")
	}
}

// A check that uses up its budget fails for good: checking the same
// output again would stop again.
func TestVerifyResultOverBudget(t *testing.T) {
	g, err := Parse([]byte(`{"type":"expr","expr":"count(output.a, # > 0) > 0"}`))
	if err != nil {
		t.Fatal(err)
	}
	r := planbus.ToolResult{ToolID: "a", State: planbus.ToolSucceeded, Output: json.RawMessage(`{"a":[1,2,3,4,5,6,7,8,9,10]}`)}
	got, ok, used := VerifyResult(r, g, 5)
	if ok || got.Error == nil || got.Error.Code != CodeVerifyFailed || got.Error.Category != planbus.CategoryPermanent {
		t.Fatalf("VerifyResult = %+v, %v; want VERIFY_FAILED, permanent", got.Error, ok)
	}
	if used != 5 {
		t.Errorf("used = %d, want the whole budget, 5", used)
	}
	if _, ok, used := VerifyResult(r, g, 100); !ok || used < 10 {
		t.Errorf("with 100 steps: ok = %v after %d steps; want it passed, after at least one step an element", ok, used)
	}
}

// Compile compiles the nested gates too: one checked on its own does not
// compile again, and says the same as through its parent.
func TestCompileNested(t *testing.T) {
	g, err := Parse([]byte(`{"type":"all","gates":[{"type":"exitCode"},{"type":"all","gates":[{"type":"matches","path":"/stdout","pattern":"main"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	inner := g.Gates[1].Gates[0]
	if inner.c == nil || g.Gates[0].c == nil || g.Gates[1].c == nil {
		t.Fatal("nested gates not compiled")
	}
	ok, why := inner.Check(json.RawMessage(`{"stdout":"dev"}`))
	if ok || why != "/stdout does not match /main/" {
		t.Errorf("nested Check = %v, %q; want false, %q", ok, why, "/stdout does not match /main/")
	}
	ok2, why2 := g.Check(json.RawMessage(`{"exitCode":0,"stdout":"dev"}`))
	if ok2 != ok || why2 != why {
		t.Errorf("parent Check = %v, %q; want %v, %q", ok2, why2, ok, why)
	}
	// A failed Compile leaves the gate as it was.
	bad := &Gate{Type: All, Gates: []*Gate{{Type: NonEmpty}, {Type: "nope"}}}
	if err := bad.Compile(); err == nil {
		t.Fatal("a gate of an unknown type compiled")
	}
	if bad.c != nil || bad.Gates[0].c != nil {
		t.Error("a failed Compile attached compiled gates")
	}
}
