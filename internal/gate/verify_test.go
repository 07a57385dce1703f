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
	if got, ok := VerifyResult(good, g); !ok || !cmp.Equal(got, good) {
		t.Errorf("passing result changed: %+v", got)
	}
	bad := planbus.ToolResult{ToolID: "a", State: planbus.ToolSucceeded, Output: json.RawMessage(`{"stdout":"no"}`)}
	got, ok := VerifyResult(bad, g)
	want := bad
	want.State = planbus.ToolFailed
	want.Error = &planbus.ErrorInfo{Code: CodeVerifyFailed, Category: planbus.CategoryTransient, Message: `verification failed: /stdout does not contain "ok"`}
	if ok || !cmp.Equal(got, want) {
		t.Errorf("refused result (-want +got):\n%s", cmp.Diff(want, got))
	}
	if bad.State != planbus.ToolSucceeded || bad.Error != nil {
		t.Error("VerifyResult changed its argument")
	}
	failedResult := planbus.ToolResult{ToolID: "a", State: planbus.ToolFailed, Error: &planbus.ErrorInfo{Code: "X", Category: planbus.CategoryPermanent}}
	if got, ok := VerifyResult(failedResult, g); !ok || !cmp.Equal(got, failedResult) {
		t.Errorf("failed result changed: %+v", got)
	}
	if _, ok := VerifyResult(bad, nil); !ok {
		t.Error("a nil gate refused a result")
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
