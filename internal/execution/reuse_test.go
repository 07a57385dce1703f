package execution

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/planbus/planbus"
)

// earlier is a result of tool id of plan r-1 on skill s.
func earlier(id string) *planbus.ToolResult {
	return &planbus.ToolResult{PlanID: "r-1", RequestID: "r", ToolID: id, Skill: "s", Attempt: 1, State: planbus.ToolSucceeded,
		Output: json.RawMessage(`{"from":"` + id + `"}`), WorkerID: "w1", DurationMs: 12}
}

const reuseChain = `{"tools":[{"toolId":"A","skill":"s"},{"toolId":"B","skill":"s","dependencies":["A"]},
	{"toolId":"C","skill":"s","dependencies":["B"]}]}`

// Tools given earlier results start succeeded with them, reused, and only
// the rest runs; the state says so after a round trip through the store.
func TestStartReusing(t *testing.T) {
	p := mustPlan(t, reuseChain)
	results := map[uint64]*planbus.ToolResult{11: earlier("A"), 12: earlier("B")}
	e, fx := StartReusing(p, t0, 8, nil, map[int]Reused{0: {Result: results[11], Seq: 11}, 1: {Result: results[12], Seq: 12}})
	if got := ids(e, fx.Releases); !slices.Equal(got, []string{"C"}) {
		t.Fatalf("released %v, want only C", got)
	}
	if diff := cmp.Diff([]string{"plan.started ", "tool.reused A", "tool.reused B", "tool.released C"}, eventTypes(fx)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if msg := fx.Events[1].Message; !strings.Contains(msg, `tool "A" of plan r-1`) {
		t.Errorf("reused event says %q", msg)
	}
	if len(fx.Applied) != 0 {
		t.Errorf("applied %v: a reused result teaches nothing about skill health again", fx.Applied)
	}
	b, _ := json.Marshal(e.State().Store())
	if !strings.Contains(string(b), `["u",1,11,`) {
		t.Errorf("stored %s, want reused tools coded u", b)
	}
	restored := roundTrip(t, e, results)
	fx1, fx2 := e.OnResultSeq(ok("C", 1), 13, t0), restored.OnResultSeq(ok("C", 1), 13, t0)
	if diff := cmp.Diff(fx1, fx2); diff != "" {
		t.Fatalf("restored engine differs (-orig +restored):\n%s", diff)
	}
	res := fx1.Done
	if res == nil || !res.Success {
		t.Fatalf("result %+v", res)
	}
	for i, want := range []bool{true, true, false} {
		o := res.Tools[i]
		if o.Reused != want || o.State != planbus.ToolSucceeded {
			t.Errorf("tool %s: reused %v state %s, want reused %v", o.ToolID, o.Reused, o.State, want)
		}
	}
	if a := res.Tools[0]; string(a.Output) != `{"from":"A"}` || a.ResultSeq != 11 || a.WorkerID != "w1" || a.Attempts != 1 {
		t.Errorf("A's outcome %+v, want the earlier result's", a)
	}
}

// A result is taken only when it is sound for the tool: its dependencies
// reused too, succeeded, on the tool's skill, passing its gate, and the
// tool not saying reuse false. Otherwise the tool runs.
func TestReuseIsRefused(t *testing.T) {
	failed := earlier("A")
	failed.State, failed.Output, failed.Error = planbus.ToolFailed, nil, &planbus.ErrorInfo{Code: "X", Message: "no", Category: planbus.CategoryPermanent}
	other := earlier("A")
	other.Skill = "t"
	tests := []struct {
		name     string
		doc      string
		reused   map[int]Reused
		released []string
	}{
		{"its dependency runs again", reuseChain, map[int]Reused{1: {Result: earlier("B"), Seq: 2}}, []string{"A"}},
		{"it failed", reuseChain, map[int]Reused{0: {Result: failed, Seq: 1}}, []string{"A"}},
		{"another skill", reuseChain, map[int]Reused{0: {Result: other, Seq: 1}}, []string{"A"}},
		{"reuse false", `{"tools":[{"toolId":"A","skill":"s","reuse":false}]}`, map[int]Reused{0: {Result: earlier("A"), Seq: 1}}, []string{"A"}},
		{"its gate refuses it", `{"tools":[{"toolId":"A","skill":"s","verify":{"type":"contains","value":"B"}}]}`,
			map[int]Reused{0: {Result: earlier("A"), Seq: 1}}, []string{"A"}},
		{"no result", reuseChain, map[int]Reused{0: {Seq: 1}}, []string{"A"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, fx := StartReusing(mustPlan(t, tt.doc), t0, 8, nil, tt.reused)
			if got := ids(e, fx.Releases); !slices.Equal(got, tt.released) {
				t.Errorf("released %v, want %v", got, tt.released)
			}
			for _, ts := range e.State().Tools {
				if ts.Reused {
					t.Errorf("tool %s reused", ts.ID)
				}
			}
		})
	}
}

// A plan whose every tool is reused succeeds at once, and its reused
// tools need no approval: they do not run.
func TestEverythingReused(t *testing.T) {
	p := mustPlan(t, `{"tools":[{"toolId":"A","skill":"s","approval":{"prompt":"go?"}}]}`)
	_, fx := StartReusing(p, t0, 8, nil, map[int]Reused{0: {Result: earlier("A"), Seq: 5}})
	if fx.Done == nil || !fx.Done.Success || len(fx.Releases) != 0 || !fx.Done.Tools[0].Reused {
		t.Fatalf("effects %+v", fx)
	}
	if diff := cmp.Diff([]string{"plan.started ", "tool.reused A", "plan.succeeded "}, eventTypes(fx)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
