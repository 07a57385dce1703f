package plan

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/planbus/planbus/schemas"
)

// fanoutDoc is a plan of a root, n parallel tools and a join, as the
// bench's fanout-n workload makes it.
func fanoutDoc(b testing.TB, n int) []byte {
	tools := []map[string]any{{"toolId": "root", "skill": "echo", "dependencies": []string{}, "input": map[string]any{}}}
	for i := range n {
		tools = append(tools, map[string]any{"toolId": fmt.Sprintf("f%d", i), "skill": "echo", "dependencies": []string{"root"}, "input": map[string]any{}})
	}
	deps := make([]string, n)
	for i := range deps {
		deps[i] = fmt.Sprintf("f%d", i)
	}
	tools = append(tools, map[string]any{"toolId": "join", "skill": "echo", "dependencies": deps, "input": map[string]any{}})
	doc, err := json.Marshal(map[string]any{"planId": "p1", "requestId": "r1", "maxConcurrency": 1024, "tools": tools})
	if err != nil {
		b.Fatal(err)
	}
	return doc
}

func BenchmarkDecodeFanout1000(b *testing.B) {
	doc := fanoutDoc(b, 1000)
	b.Run("Decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Decode(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("schema", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := schemas.Validate(schemas.Plan, doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var p Plan
			if err := json.Unmarshal(doc, &p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
