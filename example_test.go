package planbus_test

import (
	"encoding/json"
	"fmt"

	"github.com/planbus/planbus"
)

// A worker's result for one attempt of a tool, as it goes on the bus.
func ExampleToolResult() {
	res := planbus.ToolResult{
		PlanID: "p1", ToolID: "count", Skill: "wordcount", Attempt: 1,
		State:  planbus.ToolSucceeded,
		Output: json.RawMessage(`{"words":3}`),
		Token:  "the call's token, echoed",
	}
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
	fmt.Println(planbus.IdempotencyKey(res.PlanID, res.ToolID, res.Attempt))
	// Output:
	// {"planId":"p1","requestId":"","toolId":"count","skill":"wordcount","attempt":1,"state":"succeeded","output":{"words":3},"token":"the call's token, echoed"}
	// p1/count/1
}

// Which failures are worth another attempt.
func ExampleRetryable() {
	for _, c := range []planbus.Category{planbus.CategoryNetwork, planbus.CategoryTimeout, planbus.CategoryInvalidInput, planbus.CategoryPermanent} {
		fmt.Println(c, planbus.Retryable(c))
	}
	// Output:
	// network true
	// timeout true
	// invalid_input false
	// permanent false
}
