package generator

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/llm"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/request"
	"github.com/planbus/planbus/schemas"
)

// DefaultLLMBudget is an LLM generation's time budget when the planner
// sets none: the external-planner budget of the specification.
const DefaultLLMBudget = GenerationTimeout

// LLM is kind llm: a language model behind any OpenAI-compatible Chat
// Completions endpoint (Ollama, vLLM, llama.cpp's server, OpenAI) asked
// for a plan. The prompt gives the goal, the session's state, the healthy
// skills with their manifests (disabled ones left out) and the plan
// schema, and the answer is asked for as structured output
// (response_format json_schema, the plan schema). An answer that is not a
// valid plan is sent back once with what is wrong (JSON pointer and
// message) for repair; one still wrong fails the attempt, which the replan
// loop may try again. The whole exchange runs within ctx: the planner's
// LLM budget.
type LLM struct {
	llm.Endpoint
}

// llmSystem is the instruction every generation starts with; the plan
// schema follows it.
const llmSystem = `You are the planner of planbus, which runs plans as DAGs of tool calls on skills.
Answer with exactly one JSON plan document, and nothing else, that reaches the user's goal.
Rules: use only the skills listed in the request (by their exact name); give each tool a
unique toolId; a tool's input must satisfy its skill's inputSchema; a tool that needs another's
output lists it in dependencies and takes it with {"$ref": "<toolId>"} or
{"$ref": "<toolId>#/<JSON pointer>"}; tools without dependencies between them run in parallel.
Leave planId out: planbus sets it. The plan's JSON Schema:
`

func (l LLM) Generate(ctx context.Context, in Input) (*plan.Plan, error) {
	if l.URL == "" {
		return nil, &Error{Code: planbus.CodeUnsupportedKind, Category: planbus.CategoryInvalidInput,
			Message: "this planner has no language model: start it with --llm-url URL --llm-model MODEL"}
	}
	var req request.LLMRequest
	if in.Request.LLM != nil {
		req = *in.Request.LLM
	}
	model := req.Model
	if model == "" {
		model = l.Model
	}
	if model == "" {
		return nil, &Error{Code: planbus.CodeUnsupportedKind, Category: planbus.CategoryInvalidInput,
			Message: "no model to ask: give llm.model in the request, or start the planner with --llm-model"}
	}
	schema, err := bundledPlanSchema()
	if err != nil {
		return nil, err
	}
	prompt, err := llmPrompt(req.Goal, in)
	if err != nil {
		return nil, err
	}
	schemaText, _ := json.Marshal(schema)
	messages := []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage(llmSystem + string(schemaText)),
		openai.UserMessage(prompt),
	}
	format := openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
		JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "plan", Description: openai.String("a planbus plan"), Schema: schema}}}
	c := l.Client()
	var problem string
	for try := 0; try < 2; try++ {
		resp, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model, Messages: messages, ResponseFormat: format})
		if err != nil {
			return nil, l.callError(ctx, err)
		}
		if len(resp.Choices) == 0 {
			problem = "the answer has no choices"
			continue
		}
		answer := resp.Choices[0].Message.Content
		p, why := checkAnswer(answer, in)
		if why == "" {
			return p, nil
		}
		problem = why
		messages = append(messages, openai.AssistantMessage(answer), openai.UserMessage(
			"That plan is not valid: "+why+". Answer again with the whole corrected plan, as JSON only."))
	}
	return nil, &Error{Code: planbus.CodeInvalidPlan, Category: planbus.CategoryTransient,
		Message: fmt.Sprintf("model %s at %s answered no valid plan, repaired once: %s", model, l.URL, problem)}
}

// callError classifies a failed completion: out of budget, or the API
// unreachable or refusing.
func (l LLM) callError(ctx context.Context, err error) error {
	cat, msg := l.Classify(ctx, err)
	if cat == planbus.CategoryTimeout {
		return &Error{Code: planbus.CodeGenerationTimeout, Category: cat, Message: msg + " (the generation budget)"}
	}
	return &Error{Code: planbus.CodePlannerUnavailable, Category: cat, Message: msg}
}

// checkAnswer decodes a model's answer as a plan, and says what is wrong
// with it otherwise ("" when nothing is): a schema or graph error with its
// JSON pointer, or a skill it may not use.
func checkAnswer(answer string, in Input) (*plan.Plan, string) {
	doc := []byte(strings.TrimSpace(answer))
	// Some servers wrap the JSON in a Markdown fence despite the format.
	if rest, ok := strings.CutPrefix(string(doc), "```"); ok {
		rest = strings.TrimPrefix(rest, "json")
		doc = []byte(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "```")))
	}
	p, err := plan.Decode(doc)
	if err != nil {
		return nil, err.Error()
	}
	for i, t := range p.Tools {
		if _, ok := in.Skills[t.Skill]; !ok {
			return nil, fmt.Sprintf("at /tools/%d/skill: no skill %q: use one of those listed", i, t.Skill)
		}
		if slices.Contains(in.DisabledSkills, t.Skill) {
			return nil, fmt.Sprintf("at /tools/%d/skill: skill %q is disabled in this session: plan without it", i, t.Skill)
		}
	}
	return p, ""
}

// llmPrompt is the user message: the goal and what the planner knows.
func llmPrompt(goal string, in Input) (string, error) {
	type skill struct {
		Name         string          `json:"name"`
		Description  string          `json:"description,omitempty"`
		InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
		OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	}
	// The last plan's tools as they ended, without their outputs: what
	// failed and why is what a replan needs, and outputs (up to a MiB
	// each) would crowd a small model's context out.
	type toolEnd struct {
		ToolID string             `json:"toolId"`
		Skill  string             `json:"skill"`
		State  planbus.ToolState  `json:"state"`
		Error  *planbus.ErrorInfo `json:"error,omitempty"`
	}
	type lastPlan struct {
		PlanID string             `json:"planId"`
		State  planbus.PlanState  `json:"state"`
		Error  *planbus.ErrorInfo `json:"error,omitempty"`
		Tools  []toolEnd          `json:"tools"`
	}
	q := struct {
		Goal     string          `json:"goal"`
		Input    json.RawMessage `json:"input,omitempty"`
		State    map[string]any  `json:"state"`
		Skills   []skill         `json:"skills"`
		Attempt  int             `json:"attempt"`
		LastPlan *lastPlan       `json:"lastPlan,omitempty"`
	}{Goal: goal, Input: in.Request.Input, State: in.Session, Skills: []skill{}, Attempt: in.Attempt}
	if e := in.LastExecution; e != nil {
		q.LastPlan = &lastPlan{PlanID: e.PlanID, State: e.State, Error: e.Error, Tools: []toolEnd{}}
		for _, t := range e.Tools {
			q.LastPlan.Tools = append(q.LastPlan.Tools, toolEnd{ToolID: t.ToolID, Skill: t.Skill, State: t.State, Error: t.Error})
		}
	}
	if q.State == nil {
		q.State = map[string]any{}
	}
	for _, name := range SortedKeys(in.Skills) {
		if slices.Contains(in.DisabledSkills, name) {
			continue
		}
		m := in.Skills[name]
		q.Skills = append(q.Skills, skill{Name: m.Name, Description: m.Description, InputSchema: m.InputSchema, OutputSchema: m.OutputSchema})
	}
	b, err := json.MarshalIndent(q, "", "  ")
	if err != nil {
		return "", err
	}
	return "Plan for this request:\n" + string(b), nil
}

// bundledPlanSchema is the plan schema with the common definitions it
// refers to copied in: one self-contained document, as response formats
// take them.
var bundledPlanSchema = sync.OnceValues(func() (map[string]any, error) {
	read := func(name string) (map[string]any, error) {
		b, err := fs.ReadFile(schemas.FS(), name)
		if err != nil {
			return nil, err
		}
		var m map[string]any
		return m, json.Unmarshal(b, &m)
	}
	p, err := read(schemas.Plan)
	if err != nil {
		return nil, err
	}
	common, err := read("common.schema.json")
	if err != nil {
		return nil, err
	}
	defs, _ := p["$defs"].(map[string]any)
	if defs == nil {
		defs = map[string]any{}
	}
	cdefs, _ := common["$defs"].(map[string]any)
	for name, d := range cdefs {
		if _, taken := defs[name]; taken {
			return nil, fmt.Errorf("generator: plan schema and common schema both define %q", name)
		}
		defs[name] = d
	}
	p["$defs"] = defs
	delete(p, "$id")
	delete(p, "$schema")
	var rewrite func(v any)
	rewrite = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				x["$ref"] = strings.Replace(ref, "common.schema.json#", "#", 1)
			}
			for _, c := range x {
				rewrite(c)
			}
		case []any:
			for _, c := range x {
				rewrite(c)
			}
		}
	}
	rewrite(p)
	// reuseFrom is the planner's own (a replan's reuse): not the model's.
	if tool, ok := defs["tool"].(map[string]any); ok {
		if props, ok := tool["properties"].(map[string]any); ok {
			delete(props, "reuseFrom")
		}
	}
	// Only the definitions the plan reaches: a small model's context is
	// short (Ollama's default is 2,048 tokens).
	used := map[string]bool{}
	var reach func(v any)
	reach = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				if name, ok := strings.CutPrefix(ref, "#/$defs/"); ok && !used[name] {
					used[name] = true
					reach(defs[name])
				}
			}
			for k, c := range x {
				if k != "$defs" {
					reach(c)
				}
			}
		case []any:
			for _, c := range x {
				reach(c)
			}
		}
	}
	reach(p)
	for name := range defs {
		if !used[name] {
			delete(defs, name)
		}
	}
	return p, nil
})

// Budget is the generation budget of a request of kind: the LLM's
// (DefaultLLMBudget when llm is 0) for kind llm, GenerationTimeout for
// every other.
func Budget(kind string, llm time.Duration) time.Duration {
	switch {
	case kind != request.KindLLM:
		return GenerationTimeout
	case llm > 0:
		return llm
	}
	return DefaultLLMBudget
}
