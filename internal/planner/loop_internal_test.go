package planner

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/planbus/planbus"
)

// The head of an execution result is read by the JSON v2 decoder, and by
// encoding/json when v2 refuses the document, so both read it alike.
func TestExecutionHead(t *testing.T) {
	tests := []struct {
		name, doc, request string
		agent, fails       bool
	}{
		{"plain", `{"planId":"p","requestId":"r1","tools":[{"toolId":"a","output":{"requestId":"no"}}]}`, "r1", false, false},
		{"agent", `{"requestId":"r2","metadata":{"agent":{"agentId":"r2","sessionId":"s"}}}`, "r2", true, false},
		{"other metadata", `{"requestId":"r3","metadata":{"template":"t"}}`, "r3", false, false},
		{"duplicate names", `{"requestId":"x","requestId":"r4"}`, "r4", false, false},
		{"invalid UTF-8", "{\"requestId\":\"r5\",\"state\":\"\xff\"}", "r5", false, false},
		{"no request", `{"planId":"p"}`, "", false, false},
		{"not JSON", `{"requestId":`, "", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := decodeExecutionHead([]byte(tt.doc))
			if (err != nil) != tt.fails {
				t.Fatalf("err = %v, want failure %v", err, tt.fails)
			}
			if h.RequestID != tt.request || h.agent() != tt.agent {
				t.Errorf("head %q agent %v, want %q and %v", h.RequestID, h.agent(), tt.request, tt.agent)
			}
			if tt.fails {
				return
			}
			res, err := decodeExecution([]byte(tt.doc))
			if tt.request == "" {
				if err == nil {
					t.Errorf("a result without a requestId decoded")
				}
				return
			}
			if err != nil || res.RequestID != h.RequestID {
				t.Errorf("whole result %+v, %v; want requestId %q", res, err, h.RequestID)
			}
		})
	}
}

// The head of a 1,000-tool plan's execution result against the whole.
func BenchmarkExecutionResult1000(b *testing.B) {
	res := planbus.ExecutionResult{PlanID: "p1", RequestID: "r1", State: planbus.PlanSucceeded, Success: true}
	for i := range 1000 {
		res.Tools = append(res.Tools, planbus.ToolOutcome{ToolID: fmt.Sprintf("f%d", i), Skill: "echo", State: planbus.ToolSucceeded,
			Attempts: 1, Output: json.RawMessage(fmt.Sprintf(`{"echo":{"i":%d}}`, i))})
	}
	doc, err := json.Marshal(&res)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("head", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeExecutionHead(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("whole", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeExecution(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
}
