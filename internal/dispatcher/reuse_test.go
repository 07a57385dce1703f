package dispatcher_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/planbus/planbus"
)

// A plan whose tools name earlier results of their request in reuseFrom
// takes those outputs instead of running the tools, and its other tools
// see them in their inputs. A reuseFrom that names another request's
// result, another tool's, or a result that is gone is ignored: the tool
// runs.
func TestReusedResultsAreTakenNotRun(t *testing.T) {
	h := start(t, opts{})
	first, _ := h.run(`{"planId":"ra-1","requestId":"ra","tools":[{"toolId":"A","skill":"probe","input":{"n":1}},
		{"toolId":"B","skill":"probe","input":{"a":{"$ref":"A#/input"}},"dependencies":["A"]}]}`, time.Minute)
	if !first.Success {
		t.Fatalf("first plan %s: %+v", first.State, first.Error)
	}
	seqA, seqB := tool(first, "A").ResultSeq, tool(first, "B").ResultSeq
	if seqA == 0 || seqB == 0 {
		t.Fatalf("result sequences %d, %d", seqA, seqB)
	}
	second, events := h.run(fmt.Sprintf(`{"planId":"ra-2","requestId":"ra","tools":[
		{"toolId":"A","skill":"probe","input":{"n":1},"reuseFrom":{"planId":"ra-1","toolId":"A","resultSeq":%d}},
		{"toolId":"B","skill":"probe","input":{"a":{"$ref":"A#/input"}},"dependencies":["A"],"reuseFrom":{"planId":"ra-1","toolId":"B","resultSeq":%d}},
		{"toolId":"C","skill":"probe","input":{"b":{"$ref":"B#/input"}},"dependencies":["B"]}]}`, seqA, seqB), time.Minute)
	if !second.Success {
		t.Fatalf("second plan %s: %+v", second.State, second.Error)
	}
	for id, want := range map[string]int{"A": 1, "B": 1, "C": 1} {
		if got := h.probe.count(id); got != want {
			t.Errorf("tool %s ran %d times, want %d", id, got, want)
		}
	}
	for id, want := range map[string]bool{"A": true, "B": true, "C": false} {
		if o := tool(second, id); o.Reused != want || o.State != planbus.ToolSucceeded {
			t.Errorf("tool %s: %s reused %v, want reused %v", id, o.State, o.Reused, want)
		}
	}
	var c struct {
		Input struct {
			B struct {
				A struct {
					N int `json:"n"`
				} `json:"a"`
			} `json:"b"`
		} `json:"input"`
	}
	if err := json.Unmarshal(tool(second, "C").Output, &c); err != nil || c.Input.B.A.N != 1 {
		t.Errorf("C saw %s, want B's reused output in its input", tool(second, "C").Output)
	}
	if len(events.of(planbus.EventToolReused, "")) != 2 || len(events.of(planbus.EventToolReleased, "A")) != 0 {
		t.Errorf("%d tool.reused events, %d releases of A", len(events.of(planbus.EventToolReused, "")), len(events.of(planbus.EventToolReleased, "A")))
	}

	refused, _ := h.run(fmt.Sprintf(`{"planId":"rb-1","requestId":"rb","tools":[
		{"toolId":"X","skill":"probe","reuseFrom":{"planId":"ra-1","toolId":"A","resultSeq":%d}}]}`, seqA), time.Minute)
	wrongTool, _ := h.run(fmt.Sprintf(`{"planId":"ra-3","requestId":"ra","tools":[
		{"toolId":"Y","skill":"probe","reuseFrom":{"planId":"ra-1","toolId":"B","resultSeq":%d}}]}`, seqA), time.Minute)
	gone, _ := h.run(`{"planId":"ra-4","requestId":"ra","tools":[
		{"toolId":"Z","skill":"probe","reuseFrom":{"planId":"ra-1","toolId":"A","resultSeq":999999}}]}`, time.Minute)
	for _, r := range []*planbus.ExecutionResult{refused, wrongTool, gone} {
		if !r.Success || r.Tools[0].Reused {
			t.Errorf("plan %s: %s, reused %v; want the tool run", r.PlanID, r.State, r.Tools[0].Reused)
		}
	}
	for _, id := range []string{"X", "Y", "Z"} {
		if got := h.probe.count(id); got != 1 {
			t.Errorf("tool %s ran %d times, want once", id, got)
		}
	}
}
