package skills_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/skill"
)

func ExampleEcho() {
	echo := skills.Echo()
	call := &skill.Call{PlanID: "p1", ToolID: "greet", Skill: "echo", Attempt: 1,
		Input: json.RawMessage(`{"greeting":"hello"}`)}
	res, err := echo.Handler.Handle(context.Background(), call)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(string(res.Output))
	// Output: {"greeting":"hello"}
}

// Fail fails as its input says; a worker reports the failure with
// skill.ErrorInfo, and the category decides whether the call is retried.
func ExampleFail() {
	h := skill.Chain(skills.Fail().Handler, skill.Recover, skill.Timeout)
	call := &skill.Call{PlanID: "p1", ToolID: "lookup", Skill: "fail", Attempt: 1, Timeout: time.Second,
		Input: json.RawMessage(`{"category":"permanent","code":"NO_USER","message":"user 42 does not exist"}`)}
	_, err := h.Handle(context.Background(), call)
	info, _ := skill.ErrorInfo(err)
	fmt.Printf("%s %s: %s (retry: %v)\n", info.Category, info.Code, info.Message, planbus.Retryable(info.Category))
	// Output: permanent NO_USER: user 42 does not exist (retry: false)
}
