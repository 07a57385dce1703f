package client_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/worker"
)

// system starts a planbus node on an embedded server, as `planner serve`
// does, and returns its URL and how to stop it. A real program connects
// to a running system instead.
func system() (string, func()) {
	dir, err := os.MkdirTemp("", "planbus-example-")
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := node.Start(ctx, node.Config{Bus: bus.Config{Listen: "127.0.0.1:0", DataDir: dir}, Workers: 1,
		Worker: worker.Config{Skills: skills.Builtins(skills.BuiltinConfig{}), DrainTimeout: time.Second}}, bustest.Log())
	if err != nil {
		panic(err)
	}
	return n.Bus.URL, func() { n.Stop(); _ = os.RemoveAll(dir) }
}

// connect is what Example shows: a NATS connection and a client on it.
// The returned func closes the connection.
func connect(url string, opts ...client.Option) (*client.Client, func()) {
	nc, err := nats.Connect(url)
	if err != nil {
		panic(err)
	}
	c, err := client.New(nc, opts...)
	if err != nil {
		nc.Close()
		panic(err)
	}
	return c, nc.Close
}

// Run a plan request and show its outcome.
func Example() {
	url, stop := system()
	defer stop()
	nc, err := nats.Connect(url)
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	c, err := client.New(nc)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := c.Run(ctx, []byte(`{"requestId": "hello", "kind": "plan",
		"plan": {"tools": [{"toolId": "greet", "skill": "echo", "input": {"greeting": "hi"}}]}}`), nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(out.RequestID, out.Status, out.Execution.PlanID, string(out.Execution.Tools[0].Output))
	// Output: hello succeeded hello-1 {"greeting":"hi"}
}

// Build a plan in Go, submit it and read a tool's output: b echoes the
// number a echoed, through a reference.
func ExampleClient_SubmitPlan() {
	url, stop := system()
	defer stop()
	c, closeConn := connect(url)
	defer closeConn()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := c.SubmitPlan(ctx, planbus.Plan{RequestID: "typed", Tools: []planbus.Tool{
		{ToolID: "a", Skill: "echo", Input: map[string]any{"n": 42}},
		{ToolID: "b", Skill: "echo", Dependencies: []string{"a"}, Input: map[string]any{"got": planbus.Ref("a", "/n")}},
	}})
	if err != nil {
		panic(err)
	}
	out, err := run.Wait(ctx)
	if err != nil {
		panic(err)
	}
	var b struct {
		Got int `json:"got"`
	}
	if err := out.Output("b", &b); err != nil {
		panic(err)
	}
	fmt.Println(run.ID, out.Status, b.Got)
	// Output: typed succeeded 42
}

// Submit a plan, cancel it while it runs, and list what ran.
func ExampleClient_Cancel() {
	url, stop := system()
	defer stop()
	c, closeConn := connect(url, client.WithRequestTimeout(5*time.Second))
	defer closeConn()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	acc, err := c.SubmitPlanJSON(ctx, []byte(`{"planId": "nap", "tools": [
		{"toolId": "sleep", "skill": "sleep", "input": {"ms": 30000}},
		{"toolId": "wake", "skill": "echo", "dependencies": ["sleep"]}]}`))
	if err != nil {
		panic(err)
	}
	for { // until the sleep runs
		st, err := c.Status(ctx, acc.RequestID)
		if err == nil && st.Plan != nil && st.Plan.Tools[0].State == planbus.ToolRunning {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	reply, err := c.Cancel(ctx, acc.RequestID, "not needed")
	if err != nil {
		panic(err)
	}
	fmt.Println(reply.Status)
	out, err := c.Await(ctx, acc.RequestID)
	if err != nil {
		panic(err)
	}
	fmt.Println(out.Status, out.Error.Message)
	for _, t := range out.Execution.Tools {
		fmt.Println(t.ToolID, t.State, t.Reason)
	}
	list, err := c.Inspector().List(ctx, planbus.ListRequest{Status: planbus.StatusCancelled})
	if err != nil {
		panic(err)
	}
	for _, r := range list.Requests {
		fmt.Println(r.RequestID, r.Kind, r.Status, r.Attempts)
	}
	// Output:
	// cancelling
	// cancelled cancelled on request: not needed
	// sleep cancelled cancelled
	// wake skipped cancelled
	// nap plan cancelled 1
}

// Run a plan with an approval step: watch for the tool to wait, show its
// prompt and approve it.
func ExampleClient_Approve() {
	url, stop := system()
	defer stop()
	c, closeConn := connect(url)
	defer closeConn()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	acc, err := c.SubmitPlanJSON(ctx, []byte(`{"planId": "release", "tools": [
		{"toolId": "build", "skill": "echo", "input": {"version": "1.2"}},
		{"toolId": "deploy", "skill": "echo", "dependencies": ["build"],
		 "approval": {"prompt": "Deploy 1.2 to production?"}}]}`))
	if err != nil {
		panic(err)
	}
	waiting := make(chan planbus.Event, 1)
	go func() {
		_, _ = c.Watch(ctx, acc.RequestID, func(ev planbus.Event) {
			if ev.Type == planbus.EventToolWaiting {
				waiting <- ev
			}
		})
	}()
	ev := <-waiting
	fmt.Println(ev.ToolID, "asks:", ev.Message)
	reply, err := c.Approve(ctx, acc.RequestID, ev.ToolID, "release notes checked")
	if err != nil {
		panic(err)
	}
	fmt.Println(reply.Status)
	out, err := c.Await(ctx, acc.RequestID)
	if err != nil {
		panic(err)
	}
	for _, t := range out.Execution.Tools {
		fmt.Println(t.ToolID, t.State)
	}
	// Output:
	// deploy asks: Deploy 1.2 to production?
	// approved
	// build succeeded
	// deploy succeeded
}
