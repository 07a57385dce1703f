package skills_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/skills"
)

func ExampleEcho() {
	echo := skills.Echo()
	call := &plan.ToolCall{PlanID: "p1", ToolID: "greet", Skill: "echo", Attempt: 1,
		Input: json.RawMessage(`{"greeting":"hello"}`)}
	res, err := echo.Handler.Handle(context.Background(), call)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(string(res.Output))
	// Output: {"greeting":"hello"}
}

// A worker wraps every skill in Recover and Timeout, and reports a failure
// with ErrorInfo; the category decides whether the call is retried.
func ExampleErrorInfo() {
	h := skills.Chain(skills.Fail().Handler, skills.Recover, skills.Timeout)
	call := &plan.ToolCall{PlanID: "p1", ToolID: "lookup", Skill: "fail", Attempt: 1, TimeoutMs: 1000,
		Input: json.RawMessage(`{"category":"permanent","code":"NO_USER","message":"user 42 does not exist"}`)}
	_, err := h.Handle(context.Background(), call)
	info, _ := skills.ErrorInfo(err)
	fmt.Printf("%s %s: %s (retry: %v)\n", info.Category, info.Code, info.Message, plan.Retryable(info.Category))
	// Output: permanent NO_USER: user 42 does not exist (retry: false)
}
