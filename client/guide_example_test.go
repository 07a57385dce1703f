package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/planner"
	"github.com/planbus/planbus/internal/templates"
)

// A plan library in the keyed format, as an agent's author writes it.
const guideLibrary = `{
  "_meta": {"version": "1.0"},
  "plans": {
    "release": {
      "name": "Release",
      "domains": ["ops"],
      "triggers": ["release", "tag"],
      "steps": [
        {"name": "Run the tests", "tool": "terminal", "tool_hint": "go test ./...",
         "verify": {"type": "output_not_contains", "value": "FAIL"}, "on_fail": "block"},
        {"name": "Tag the release", "tool": "terminal", "tool_hint": "git tag v1.2.0",
         "verify": {"type": "exit_code_zero"}}
      ]
    }
  }
}`

// An agent guided through a plan, one turn at a time: the first turn's
// message starts the plan, each later turn reports the tool the agent ran
// and gets the context for its next step.
func ExampleClient_Guide() {
	lib, err := templates.Decode([]byte(guideLibrary))
	if err != nil {
		panic(err)
	}
	dir, _ := os.MkdirTemp("", "planbus-example-")
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := node.Start(ctx, node.Config{Bus: bus.Config{Listen: "127.0.0.1:0", DataDir: dir}, NoDispatcher: true,
		Planner: planner.Config{Templates: lib}}, bustest.Log())
	if err != nil {
		panic(err)
	}
	defer n.Stop()

	nc, err := nats.Connect(n.Bus.URL)
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	c, err := client.New(nc)
	if err != nil {
		panic(err)
	}
	turns := []planbus.GuideTurn{
		{SessionID: "agent-7", Domain: "ops", Message: "release and tag v1.2.0"},
		{SessionID: "agent-7", ToolResults: []planbus.GuideToolResult{{Tool: "terminal", Output: json.RawMessage(`"--- FAIL: TestParse"`)}}},
		{SessionID: "agent-7", ToolResults: []planbus.GuideToolResult{{Tool: "terminal", Output: json.RawMessage(`"ok  example.com/app"`)}}},
	}
	for _, turn := range turns {
		r, err := c.Guide(ctx, turn)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s (step %d of %d)\n", r.Transition, r.Plan.Step, r.Plan.Of)
	}
	r, _ := c.Guide(ctx, planbus.GuideTurn{SessionID: "agent-7"})
	fmt.Println(r.Context)
	// Output:
	// activated (step 1 of 2)
	// blocked (step 1 of 2)
	// advanced (step 2 of 2)
	// [ACTIVE PLAN: release]
	// Step 1 of 2: Run the tests [COMPLETED]
	// Step 2 of 2: Tag the release ← YOU ARE HERE
	//   Tool: terminal
	//   Command hint: git tag v1.2.0
	//   Verify: exit code 0
	//
	// INSTRUCTION: Execute Step 2 now. Do not skip ahead. Verify the result before proceeding.
}
