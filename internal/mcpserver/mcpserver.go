// Package mcpserver is planbus as a Model Context Protocol server: the
// tools an MCP agent (a desktop or IDE client, an agent framework) calls
// to submit requests and plans, follow and steer them, list the skills
// and take guided turns, over a planbus client connection. `planner mcp`
// serves it over stdio or streamable HTTP.
//
// Every tool has an input and an output schema. A planbus refusal is an
// MCP tool error (isError) whose text starts with its code, such as
// "INVALID_REQUEST: at /tools/0/skill: ...", so the agent can read and
// correct it; a failure to reach the system is one too ("UNAVAILABLE: ...").
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
)

// New returns the MCP server of planbus's tools, each calling through cl.
// version is reported to clients as the server's.
func New(cl *client.Client, version string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "planbus", Title: "planbus", Version: version}, &mcp.ServerOptions{
		Instructions: "planbus plans requests and runs plans (DAGs of tool calls on skills) on its workers. " +
			"run_plan runs a plan document and waits for its outcome; submit_request sends a request " +
			"(kinds htn, goap, template, external, guided) to the planner; status, cancel and approve " +
			"follow and steer what runs; list_skills says which skills exist and are healthy; " +
			"guide_turn takes one turn of a guided session and returns the plan context to follow.",
	})
	t := &tools{cl: cl}
	mcp.AddTool(s, &mcp.Tool{Name: "submit_request",
		Description: "Submit a plan request to the planner and return at once with its request id. " +
			"The request is a planbus request document (docs/api.md): kind htn, goap, template, external or guided.",
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(true)},
	}, t.submitRequest)
	mcp.AddTool(s, &mcp.Tool{Name: "run_plan",
		Description: "Run a plan document (planId, tools with skills, inputs and dependencies; docs/api.md) and, " +
			"unless wait is false, wait for its outcome, sending a progress notification per plan event " +
			"when the call carries a progress token.",
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(true)},
	}, t.runPlan)
	mcp.AddTool(s, &mcp.Tool{Name: "status",
		Description: "Where a request or plan is: its replan loop, its latest plan and each tool's state.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, t.status)
	mcp.AddTool(s, &mcp.Tool{Name: "cancel",
		Description: "Cancel a request or plan by its id: running calls are stopped, pending tools skipped.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true},
	}, t.cancel)
	mcp.AddTool(s, &mcp.Tool{Name: "approve",
		Description: "Decide on a tool waiting for approval: approve it (the default) or reject it (reject: true).",
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true},
	}, t.approve)
	mcp.AddTool(s, &mcp.Tool{Name: "list_skills",
		Description: "The skills the workers serve and their health in a session (the default session if none is given).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, t.listSkills)
	mcp.AddTool(s, &mcp.Tool{Name: "guide_turn",
		Description: "One turn of a guided session: send the user's message and the outputs of the tools run since " +
			"the last turn; the reply's context is the active plan, the current step marked, to follow step by step.",
	}, t.guideTurn)
	mcp.AddTool(s, &mcp.Tool{Name: "agent_start",
		Description: "Start a GOAP agent: a request of kind goap with an agent block (docs/api.md); it plans, runs and replans toward its goals.",
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(true)},
	}, t.agentStart)
	mcp.AddTool(s, &mcp.Tool{Name: "agent_status",
		Description: "The GOAP agent of a session: its goal, plan, step and status.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, t.agentStatus)
	return s
}

func ptr[T any](v T) *T { return &v }

type tools struct{ cl *client.Client }

// Document is a JSON object as a tool takes or returns it.
type Document = map[string]any

// RequestInput is submit_request's and agent_start's input.
type RequestInput struct {
	Request Document `json:"request" jsonschema:"the plan request document (docs/api.md)"`
}

// PlanInput is run_plan's input.
type PlanInput struct {
	Plan Document `json:"plan" jsonschema:"the plan document: planId, tools (toolId, skill, input, dependencies), timeoutMs (docs/api.md)"`
	Wait *bool    `json:"wait,omitempty" jsonschema:"wait for the outcome (default true); false returns once the plan is accepted"`
}

// RunOutput is run_plan's output: the acceptance, and the outcome when
// the call waited for it.
type RunOutput struct {
	RequestID string   `json:"requestId"`
	Status    string   `json:"status" jsonschema:"accepted, or the outcome's status: succeeded, failed, fallback or cancelled"`
	Success   bool     `json:"success"`
	Outcome   Document `json:"outcome,omitempty" jsonschema:"the request's outcome (docs/api.md), when waited for"`
}

// IDInput names a request or plan.
type IDInput struct {
	ID string `json:"id" jsonschema:"a request id or plan id"`
}

// CancelInput is cancel's input.
type CancelInput struct {
	ID     string `json:"id" jsonschema:"a request id or plan id"`
	Reason string `json:"reason,omitempty" jsonschema:"why, said in the outcome and the events"`
}

// ApproveInput is approve's input.
type ApproveInput struct {
	ID     string `json:"id" jsonschema:"the request id or plan id"`
	ToolID string `json:"toolId" jsonschema:"the tool waiting for approval"`
	Reject bool   `json:"reject,omitempty" jsonschema:"reject instead of approve"`
	Reason string `json:"reason,omitempty"`
}

// SkillsInput is list_skills' input.
type SkillsInput struct {
	SessionID string `json:"sessionId,omitempty" jsonschema:"the session whose skill health to report"`
}

// SessionInput is agent_status' input.
type SessionInput struct {
	SessionID string `json:"sessionId" jsonschema:"the agent's session"`
}

// GuideInput is guide_turn's input.
type GuideInput struct {
	SessionID   string              `json:"sessionId" jsonschema:"the guided session"`
	TurnID      string              `json:"turnId,omitempty" jsonschema:"makes the turn safe to send again"`
	Message     string              `json:"message" jsonschema:"the user's message"`
	Domain      string              `json:"domain,omitempty" jsonschema:"the message's domain, such as bugfix"`
	ToolResults []GuideToolResultIn `json:"toolResults,omitempty" jsonschema:"outputs of the tools run since the last turn, oldest first"`
}

// GuideToolResultIn is one tool output a guided turn reports.
type GuideToolResultIn struct {
	Skill    string `json:"skill,omitempty"`
	Tool     string `json:"tool,omitempty"`
	Output   any    `json:"output" jsonschema:"what the tool returned: a string or any JSON"`
	ExitCode *int   `json:"exitCode,omitempty"`
}

// GuideOutput is guide_turn's output.
type GuideOutput struct {
	SessionID  string   `json:"sessionId"`
	Transition string   `json:"transition" jsonschema:"what the turn did: activated, advanced, completed, aborted, expired or none"`
	Context    string   `json:"context" jsonschema:"the text to follow: the active plan with the current step marked"`
	Message    string   `json:"message,omitempty"`
	Reply      Document `json:"reply" jsonschema:"the whole reply (docs/api.md, guided sessions)"`
}

// DocumentOutput wraps a reply as a document.
type DocumentOutput struct {
	Result Document `json:"result"`
}

func (t *tools) submitRequest(ctx context.Context, _ *mcp.CallToolRequest, in RequestInput) (*mcp.CallToolResult, *planbus.Accepted, error) {
	doc, err := encode("request", in.Request)
	if err != nil {
		return nil, nil, err
	}
	acc, err := t.cl.SubmitRequest(ctx, doc)
	return nil, acc, toolError(err)
}

func (t *tools) agentStart(ctx context.Context, _ *mcp.CallToolRequest, in RequestInput) (*mcp.CallToolResult, *planbus.Accepted, error) {
	doc, err := encode("request", in.Request)
	if err != nil {
		return nil, nil, err
	}
	acc, err := t.cl.StartAgent(ctx, doc)
	return nil, acc, toolError(err)
}

func (t *tools) runPlan(ctx context.Context, req *mcp.CallToolRequest, in PlanInput) (*mcp.CallToolResult, RunOutput, error) {
	doc, err := encode("plan", in.Plan)
	if err != nil {
		return nil, RunOutput{}, err
	}
	if in.Wait != nil && !*in.Wait {
		acc, err := t.cl.SubmitPlanJSON(ctx, doc)
		if err != nil {
			return nil, RunOutput{}, toolError(err)
		}
		return nil, RunOutput{RequestID: acc.RequestID, Status: acc.Status}, nil
	}
	onEvent := progress(ctx, req)
	out, err := t.cl.RunPlan(ctx, doc, onEvent)
	if err != nil {
		return nil, RunOutput{}, toolError(err)
	}
	d, err := document(out)
	if err != nil {
		return nil, RunOutput{}, err
	}
	return nil, RunOutput{RequestID: out.RequestID, Status: string(out.Status), Success: out.Success, Outcome: d}, nil
}

// progress returns a function that sends each plan event as a progress
// notification, when the call asked for them (a progress token); nil
// when it did not.
func progress(ctx context.Context, req *mcp.CallToolRequest) func(planbus.Event) {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return nil
	}
	n := 0.0
	return func(ev planbus.Event) {
		n++
		msg := string(ev.Type)
		if ev.ToolID != "" {
			msg += " " + ev.ToolID
		}
		if ev.Message != "" {
			msg += ": " + ev.Message
		}
		// Best effort, as events are: a notification lost changes nothing.
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: n, Message: msg})
	}
}

func (t *tools) status(ctx context.Context, _ *mcp.CallToolRequest, in IDInput) (*mcp.CallToolResult, DocumentOutput, error) {
	st, err := t.cl.Status(ctx, in.ID)
	if err != nil {
		return nil, DocumentOutput{}, toolError(err)
	}
	d, err := document(st)
	return nil, DocumentOutput{Result: d}, err
}

func (t *tools) cancel(ctx context.Context, _ *mcp.CallToolRequest, in CancelInput) (*mcp.CallToolResult, *planbus.CancelReply, error) {
	reply, err := t.cl.Cancel(ctx, in.ID, in.Reason)
	return nil, reply, toolError(err)
}

func (t *tools) approve(ctx context.Context, _ *mcp.CallToolRequest, in ApproveInput) (*mcp.CallToolResult, *planbus.ApproveReply, error) {
	decide := t.cl.Approve
	if in.Reject {
		decide = t.cl.Reject
	}
	reply, err := decide(ctx, in.ID, in.ToolID, in.Reason)
	return nil, reply, toolError(err)
}

func (t *tools) listSkills(ctx context.Context, _ *mcp.CallToolRequest, in SkillsInput) (*mcp.CallToolResult, DocumentOutput, error) {
	reply, err := t.cl.Inspector().Skills(ctx, in.SessionID)
	if err != nil {
		return nil, DocumentOutput{}, toolError(err)
	}
	d, err := document(reply)
	return nil, DocumentOutput{Result: d}, err
}

func (t *tools) agentStatus(ctx context.Context, _ *mcp.CallToolRequest, in SessionInput) (*mcp.CallToolResult, DocumentOutput, error) {
	st, err := t.cl.AgentStatus(ctx, in.SessionID)
	if err != nil {
		return nil, DocumentOutput{}, toolError(err)
	}
	d, err := document(st)
	return nil, DocumentOutput{Result: d}, err
}

func (t *tools) guideTurn(ctx context.Context, _ *mcp.CallToolRequest, in GuideInput) (*mcp.CallToolResult, GuideOutput, error) {
	turn := planbus.GuideTurn{SessionID: in.SessionID, TurnID: in.TurnID, Message: in.Message, Domain: in.Domain}
	for i, r := range in.ToolResults {
		out, err := json.Marshal(r.Output)
		if err != nil {
			return nil, GuideOutput{}, fmt.Errorf("%s: toolResults[%d].output: %v", planbus.CodeInvalidRequest, i, err)
		}
		turn.ToolResults = append(turn.ToolResults, planbus.GuideToolResult{Skill: r.Skill, Tool: r.Tool, Output: out, ExitCode: r.ExitCode})
	}
	reply, err := t.cl.Guide(ctx, turn)
	if err != nil {
		return nil, GuideOutput{}, toolError(err)
	}
	d, err := document(reply)
	if err != nil {
		return nil, GuideOutput{}, err
	}
	return nil, GuideOutput{SessionID: reply.SessionID, Transition: reply.Transition, Context: reply.Context, Message: reply.Message, Reply: d}, nil
}

// encode is an input document as JSON; what names it in the error.
func encode(what string, d Document) ([]byte, error) {
	if d == nil {
		return nil, fmt.Errorf("%s: %s: want a JSON object", planbus.CodeInvalidRequest, what)
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %v", planbus.CodeInvalidRequest, what, err)
	}
	return b, nil
}

// document is v as a JSON object.
func document(v any) (Document, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var d Document
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, err
	}
	return d, nil
}

// toolError is err as the text of a tool error, led by its planbus code:
// a refusal's own, NOT_FOUND, or UNAVAILABLE when the system could not be
// asked or did not answer.
func toolError(err error) error {
	if err == nil {
		return nil
	}
	var rej *client.RejectedError
	switch {
	case errors.As(err, &rej):
		if f := rej.Reply.Error.Field; f != "" {
			return fmt.Errorf("%s: at %s: %s", rej.Reply.Error.Code, f, rej.Reply.Error.Message)
		}
		return fmt.Errorf("%s: %s", rej.Reply.Error.Code, rej.Reply.Error.Message)
	case errors.Is(err, client.ErrNotFound):
		return fmt.Errorf("%s: %v", planbus.CodeNotFound, err)
	}
	return fmt.Errorf("%s: %v", planbus.CodeUnavailable, err)
}
