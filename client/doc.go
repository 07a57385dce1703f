// Package client talks to a running planbus system the way a user does:
// it submits plan requests and bare plans to the planner, waits for their
// outcomes, watches their progress events (those that already happened
// and those to come), reads a request's or a plan's state, cancels
// requests, and approves or rejects tools that wait for a person. An
// Inspector (NewInspector, Client.Inspector) does the admin reads apart
// from running work: recent requests (List), the skills and their health
// (Skills), and a session's reset (ResetSession). A Client also starts, stops and reports a session's GOAP agent
// (StartAgent, StopAgent, AgentStatus). Guide plays one turn of a guided
// session (planbus.guide.turn), for an agent that runs its tools itself.
//
// A Client needs a NATS connection and nothing else. Apart from
// ExecutePlan, which publishes a plan straight to the dispatchers and so
// needs a right the client role lacks, it works within the permissions of
// planbus's client role: it calls the planner's endpoints
// (planbus.plan.request, planbus.plan.cancel, planbus.plan.list,
// planbus.agent.*, planbus.plan.approve),
// subscribes to outcomes and events, and reads streams and buckets by
// subject or key. It creates no consumer (the client role may not), so it
// waits for an outcome by subscribing to its subject and reading the
// stream's last message on it, and reads past events with direct gets.
//
//	nc, _ := nats.Connect("nats://127.0.0.1:4222")
//	c, _ := client.New(nc)
//	run, err := c.SubmitPlan(ctx, planbus.Plan{Tools: []planbus.Tool{{ToolID: "a", Skill: "echo"}}})
//	out, err := run.Wait(ctx)
//
// A plan built in Go (planbus.Plan) is checked against the plan schema
// before it is sent, and SubmitPlan returns a Run: a handle to wait for
// the outcome, follow the events, read the status or cancel. Requests and
// plans may also be sent as JSON documents (schemas/plan-request.schema.json,
// schemas/plan.schema.json: Run, SubmitRequest, SubmitPlanJSON, RunPlan);
// what comes back are the message types of package planbus. The Client
// never changes a document it is given.
// Options set its logger (WithLogger), how long it waits for the
// planner's replies (WithRequestTimeout), how often a wait reads the outcome's
// stream again, for one published while the connection was down
// (WithPollInterval) and how many events it holds for a slow
// onEvent (WithEventBuffer).
//
// A Client is safe for concurrent use. Its calls that block take a context
// and return when it ends.
package client
