package plan

import (
	"strconv"
	"testing"
)

// BenchmarkCheck measures Check, which Decode and the planners call on
// every plan: a chain of 25 tools (a GOAP maze plan), the fanout of
// BenchmarkDecodeFanout1000 and a chain of 100,000 tools.
func BenchmarkCheck(b *testing.B) {
	chain := func(n int) []Tool {
		tools := make([]Tool, n)
		for i := range tools {
			tools[i] = Tool{ToolID: "t" + strconv.Itoa(i), Skill: "echo", Input: []byte(`{}`), Dependencies: []string{}}
			if i > 0 {
				tools[i].Dependencies = []string{tools[i-1].ToolID}
			}
		}
		return tools
	}
	fanout := func(n int) []Tool {
		tools := []Tool{{ToolID: "root", Skill: "echo", Input: []byte(`{}`), Dependencies: []string{}}}
		join := Tool{ToolID: "join", Skill: "echo", Input: []byte(`{}`)}
		for i := range n {
			id := "f" + strconv.Itoa(i)
			tools = append(tools, Tool{ToolID: id, Skill: "echo", Input: []byte(`{}`), Dependencies: []string{"root"}})
			join.Dependencies = append(join.Dependencies, id)
		}
		return append(tools, join)
	}
	for _, c := range []struct {
		name  string
		tools []Tool
	}{{"chain25", chain(25)}, {"fanout1000", fanout(1000)}, {"chain100k", chain(100_000)}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p := Plan{Tools: c.tools}
				if err := p.Check(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
