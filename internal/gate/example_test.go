package gate_test

import (
	"encoding/json"
	"fmt"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/gate"
)

func Example() {
	g, err := gate.Parse([]byte(`{"type":"all","gates":[{"type":"exitCode"},{"type":"contains","path":"/stdout","value":"ok"}]}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(g)
	fmt.Println(g.Check(json.RawMessage(`{"exitCode":0,"stdout":"all OK"}`)))
	fmt.Println(g.Check(json.RawMessage(`{"exitCode":2,"stdout":""}`)))

	// What the engine does with a result the gate refuses.
	r, ok, _ := gate.VerifyResult(planbus.ToolResult{ToolID: "test", Attempt: 1, State: planbus.ToolSucceeded,
		Output: json.RawMessage(`{"exitCode":0,"stdout":"3 failed"}`)}, g, gate.DefaultSteps)
	fmt.Println(ok, r.State, r.Error.Code, r.Error.Category, r.Error.Message)

	_, err = gate.Parse([]byte(`{"type":"matches","pattern":"("}`))
	fmt.Println(err)
	// Output:
	// exit code 0 and /stdout contains "ok"
	// true exit code 0 and /stdout contains "ok"
	// false exit code 2, want 0
	// false failed VERIFY_FAILED transient verification failed: /stdout does not contain "ok"
	// gate: invalid: pattern: error parsing regexp: missing closing ): `(`
}
