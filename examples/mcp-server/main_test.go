package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The example server's tools, called by the SDK's client over an
// in-memory connection: results, a tool error, a cancelled wait.
func TestExampleServerTools(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, ct := mcp.NewInMemoryTransports()
	if _, err := NewServer().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
		if tool.Name == "add" && (tool.Annotations == nil || !tool.Annotations.ReadOnlyHint || !tool.Annotations.IdempotentHint) {
			t.Errorf("add's annotations %+v: want read-only and idempotent", tool.Annotations)
		}
	}
	if strings.Join(names, ",") != "add,refuse,shout,wait" {
		t.Errorf("tools %v", names)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 2, "b": 40}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	if res.IsError || string(b) != `{"sum":42}` {
		t.Errorf("add: error %v, %s", res.IsError, b)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "refuse", Arguments: map[string]any{"reason": "no"}})
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !res.IsError || !ok || tc.Text != "refused: no" {
		t.Errorf("refuse: error %v, content %+v", res.IsError, res.Content)
	}
	short, stop := context.WithTimeout(ctx, 100*time.Millisecond)
	defer stop()
	if _, err := cs.CallTool(short, &mcp.CallToolParams{Name: "wait", Arguments: map[string]any{"ms": 60000}}); err == nil {
		t.Error("a wait past the caller's deadline returned")
	}
}
