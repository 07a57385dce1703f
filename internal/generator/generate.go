package generator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/health"
	"github.com/planbus/planbus/internal/htn"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/request"
	"github.com/planbus/planbus/internal/telemetry"
	"github.com/planbus/planbus/internal/text"
)

// GenerationTimeout is the strict budget for producing one plan, not
// configurable: an external planner that answers later has failed the
// attempt, a deterministic generator that runs out ends the loop.
const GenerationTimeout = 5 * time.Second

// Input is what a generator is given for one attempt.
type Input struct {
	Request        *request.Request
	Attempt        int
	DisabledSkills []string
	ParentPlanID   string
	LastExecution  *planbus.ExecutionResult
	// LastPlan is the plan of the last attempt, when there was one.
	LastPlan *plan.Plan
	// Session is the session's state document: the planner's world state.
	Session map[string]any
	// Skills are the manifests of every advertised skill.
	Skills map[string]planbus.SkillManifest
	// Health of the advertised skills in the request's session, and the
	// last error of those that are not healthy.
	Health      map[string]string
	HealthError map[string]string
	// Memory and Nodes are this generation's budgets, in bytes held and
	// search nodes, from the planner's maxima and the request's own
	// (the planner's Config.limitsFor). 0 leaves a generator's default.
	Memory int64
	Nodes  int64
}

// Generator produces one plan. Generate must honour ctx, whose deadline is
// the generation budget (GenerationTimeout).
type Generator interface {
	Generate(ctx context.Context, in Input) (*plan.Plan, error)
}

// TimeBudgetCode is the code of a deterministic generation of kind
// (htn, goap, template, plan) that used up GenerationTimeout:
// planbus.CodeHTNTimeBudget and the like, "" for another kind.
func TimeBudgetCode(kind string) planbus.Code {
	return map[string]planbus.Code{request.KindHTN: planbus.CodeHTNTimeBudget, request.KindGOAP: planbus.CodeGOAPTimeBudget,
		request.KindTemplate: planbus.CodeTemplateTimeBudget, request.KindPlan: planbus.CodePlanTimeBudget}[kind]
}

// Error is a failed generation. Errors of category timeout, network or
// transient use up an attempt and the loop tries again; others end it.
type Error struct {
	Code     planbus.Code
	Category planbus.Category
	Message  string
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

func (e *Error) Info() *planbus.ErrorInfo {
	return &planbus.ErrorInfo{Code: e.Code, Category: e.Category, Message: e.Message}
}

func ErrorOf(err error) *Error {
	var ge *Error
	if errors.As(err, &ge) {
		return ge
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Code: planbus.CodeGenerationTimeout, Category: planbus.CategoryTimeout,
			Message: fmt.Sprintf("no plan within the %s generation budget", GenerationTimeout)}
	}
	return &Error{Code: planbus.CodeGenerationFailed, Category: planbus.CategoryInternal, Message: err.Error()}
}

// Retryable reports whether another generation attempt may do better.
func (e *Error) Retryable() bool {
	switch e.Category {
	case planbus.CategoryTimeout, planbus.CategoryNetwork, planbus.CategoryTransient:
		return true
	}
	return false
}

// Fixed is kind plan: the request's own plan, every attempt.
type Fixed struct{}

func (Fixed) Generate(_ context.Context, in Input) (*plan.Plan, error) {
	p, err := plan.Decode(in.Request.Plan)
	if err != nil {
		return nil, &Error{Code: planbus.CodeInvalidPlan, Category: planbus.CategoryInvalidInput, Message: err.Error()}
	}
	for _, t := range p.Tools {
		if !slices.Contains(in.DisabledSkills, t.Skill) {
			continue
		}
		why := "it failed in an earlier attempt of this request"
		if in.Health[t.Skill] == health.PermanentFailure {
			why = fmt.Sprintf("it is in permanentFailure in session %s", in.Request.SessionID)
			if e := in.HealthError[t.Skill]; e != "" {
				why += " (last error: " + e + ")"
			}
			why += fmt.Sprintf(", until 'planner reset %s' heals it", in.Request.SessionID)
		}
		return nil, &Error{Code: planbus.CodeSkillDisabled, Category: planbus.CategoryPermanent,
			Message: fmt.Sprintf("tool %q needs skill %q, which is disabled: %s; a fixed plan cannot avoid it", t.ToolID, t.Skill, why)}
	}
	return p, nil
}

// External asks a planner over NATS request/reply.
type External struct {
	NC *nats.Conn // the connection the questions go out on
}

// ExternalRequest is what an external planner receives
// (planbus.PlannerQuestion).
type ExternalRequest = planbus.PlannerQuestion

// ExternalSkill is a skill as an external planner sees it.
type ExternalSkill = planbus.PlannerSkill

func (x External) Generate(ctx context.Context, in Input) (*plan.Plan, error) {
	q := ExternalRequest{RequestID: in.Request.RequestID, SessionID: in.Request.SessionID, Attempt: in.Attempt,
		MaxAttempts: in.Request.MaxAttempts, Input: in.Request.Input, DisabledSkills: in.DisabledSkills,
		ParentPlanID: in.ParentPlanID, LastExecution: in.LastExecution, Session: in.Session, Skills: []ExternalSkill{}}
	if q.DisabledSkills == nil {
		q.DisabledSkills = []string{}
	}
	for _, name := range SortedKeys(in.Skills) {
		q.Skills = append(q.Skills, ExternalSkill{SkillManifest: in.Skills[name], Health: in.Health[name]})
	}
	data, err := json.Marshal(q)
	if err != nil {
		return nil, err
	}
	// The generation's trace context goes along: an external planner that
	// speaks W3C trace context continues the trace.
	reply, err := x.NC.RequestMsgWithContext(ctx, &nats.Msg{Subject: in.Request.Planner, Data: data, Header: telemetry.Inject(ctx, nil)})
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, &Error{Code: planbus.CodePlannerUnavailable, Category: planbus.CategoryNetwork,
			Message: fmt.Sprintf("no external planner answers on %s", in.Request.Planner)}
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		return nil, &Error{Code: planbus.CodeGenerationTimeout, Category: planbus.CategoryTimeout,
			Message: fmt.Sprintf("external planner %s did not answer within %s", in.Request.Planner, GenerationTimeout)}
	case err != nil:
		return nil, &Error{Code: planbus.CodePlannerUnavailable, Category: planbus.CategoryNetwork, Message: err.Error()}
	}
	var failed struct {
		Error *planbus.ErrorInfo `json:"error"`
	}
	if json.Unmarshal(reply.Data, &failed) == nil && failed.Error != nil {
		cat := failed.Error.Category
		if cat == "" {
			cat = planbus.CategoryInternal
		}
		return nil, &Error{Code: failed.Error.Code, Category: cat, Message: "external planner: " + failed.Error.Message}
	}
	p, err := plan.Decode(reply.Data)
	if err != nil {
		// A bad plan from a planner is worth another try: it may do better.
		return nil, &Error{Code: planbus.CodeInvalidPlan, Category: planbus.CategoryTransient,
			Message: fmt.Sprintf("external planner %s: %v", in.Request.Planner, err)}
	}
	return p, nil
}

// HTN is kind htn: InductorHtn domains planned by internal/htn.
type HTN struct {
	Domains string // directory of <name>.htn files
}

// Program loads the request's domain with its extra facts and the
// session's ("facts": ["at(downtown)", ...]).
func (h HTN) Program(r *request.HTNRequest, session map[string]any) (*htn.Program, error) {
	src := r.Program
	if r.Domain != "" {
		if h.Domains == "" {
			return nil, &request.Error{Field: "/htn/domain", Msg: "this planner has no --domains directory; send the domain inline as htn.program"}
		}
		b, err := os.ReadFile(filepath.Join(h.Domains, r.Domain+".htn"))
		if err != nil {
			return nil, &request.Error{Field: "/htn/domain", Msg: fmt.Sprintf("no domain %q in the planner's domains directory", r.Domain)}
		}
		src = string(b)
	}
	facts := slices.Clone(r.Facts)
	if list, ok := session["facts"].([]any); ok {
		for _, f := range list {
			if s, ok := f.(string); ok {
				facts = append(facts, s)
			}
		}
	}
	lines := strings.Count(src, "\n") + 1
	var b strings.Builder
	b.WriteString(src)
	for _, f := range facts {
		b.WriteString("\n")
		b.WriteString(strings.TrimSuffix(strings.TrimSpace(f), "."))
		b.WriteString(".")
	}
	prog, err := htn.Parse(b.String())
	if err != nil {
		var pe *htn.ParseError
		if errors.As(err, &pe) && pe.Line > lines {
			return nil, &request.Error{Field: "/htn/facts", Msg: fmt.Sprintf("fact %d: %v", pe.Line-lines, err)}
		}
		field := "/htn/program"
		if r.Domain != "" {
			field = "/htn/domain"
		}
		return nil, &request.Error{Field: field, Msg: err.Error()}
	}
	return prog, nil
}

func (h HTN) Generate(ctx context.Context, in Input) (*plan.Plan, error) {
	r := in.Request.HTN
	prog, err := h.Program(r, in.Session)
	if err != nil {
		return nil, &Error{Code: planbus.CodeInvalidDomain, Category: planbus.CategoryInvalidInput, Message: err.Error()}
	}
	bind := operatorSkills(in.Skills)
	refused := map[string]string{}
	disabled := func(op string) bool {
		skill := bind(op)
		switch {
		case slices.Contains(in.DisabledSkills, skill):
			refused[op] = "skill " + skill + " is disabled"
			return true
		case !HasSkill(in.Skills, skill):
			refused[op] = "no worker serves skill " + skill
			return true
		}
		return false
	}
	res, err := prog.Plan(ctx, r.Goal, htn.Options{FirstOnly: true, Disabled: disabled,
		Budget: htn.Budget{Memory: in.Memory, Nodes: in.Nodes}, Trace: r.Traces, TraceLimit: HTNTraceLimit})
	var be *htn.BudgetError
	switch {
	case errors.Is(err, htn.ErrCanceled):
		return nil, ctx.Err()
	case errors.As(err, &be):
		return nil, htnBudgetError(be, r.Goal)
	case errors.Is(err, htn.ErrSyntax):
		return nil, &Error{Code: planbus.CodeInvalidGoal, Category: planbus.CategoryInvalidInput, Message: fmt.Sprintf("goal %q: %v", r.Goal, err)}
	case err != nil:
		return nil, &Error{Code: planbus.CodeHTNError, Category: planbus.CategoryPermanent, Message: err.Error()}
	}
	if len(res.Plans) == 0 {
		msg := fmt.Sprintf("no plan for %s", r.Goal)
		if f := res.Failure; f != nil {
			// Where the search got furthest: the task, and the method
			// condition or operator that stopped it (htn.Failure).
			msg += ": the search got furthest at " + text.Clip(f.String(), maxFailureText)
		}
		if len(refused) > 0 {
			var why []string
			for _, op := range SortedKeys(refused) {
				why = append(why, op+" ("+refused[op]+")")
			}
			msg += "; operators not applied: " + strings.Join(why, ", ")
		}
		return nil, &Error{Code: planbus.CodeNoPlan, Category: planbus.CategoryPermanent, Message: msg}
	}
	return htnToPlan(res.Plans[0], r, bind, in.Skills, searchTrace(res))
}

// The bounds of the search trace a request with htn.traces gets in its
// plan's metadata, so that the plan fits the store beside its request.
const (
	HTNTraceLimit = 500      // events recorded
	HTNTraceBytes = 64 << 10 // text kept, at most
)

// maxFailureText bounds the furthest failure in a NO_PLAN message, so
// that what follows it (the operators not applied) survives the cut of
// error messages to maxErrorMessage.
const maxFailureText = 2 << 10

// htnSearch is metadata.htn.search: the search's events as planner htn
// -traces prints them, and how many were left out.
type htnSearch struct {
	Events  []string `json:"events"`
	Dropped int64    `json:"dropped,omitempty"`
}

// searchTrace is the search trace of res for the plan's metadata, nil if
// none was recorded: the first events that fit HTNTraceBytes.
func searchTrace(res *htn.Result) *htnSearch {
	if res.Trace == nil {
		return nil
	}
	s := &htnSearch{Events: []string{}, Dropped: res.TraceDropped}
	size := 0
	for i, ev := range res.Trace {
		line := ev.String()
		if size += len(line); size > HTNTraceBytes {
			s.Dropped += int64(len(res.Trace) - i)
			break
		}
		s.Events = append(s.Events, line)
	}
	return s
}

// htnBudgetError is a search that ran out of its budget: permanent, since
// the same search would run out again, with a code naming the budget.
func htnBudgetError(be *htn.BudgetError, goal string) *Error {
	var code planbus.Code
	var msg string
	switch be.Limit {
	case htn.BudgetMemory:
		code = planbus.CodeHTNMemoryBudget
		msg = fmt.Sprintf("planning %s held about %d bytes, over its memory budget of %d (htn.budget.memory, --htn-max-memory)", goal, be.Used, be.Budget)
	case htn.BudgetNodes:
		code = planbus.CodeHTNNodeBudget
		msg = fmt.Sprintf("planning %s created %d search nodes, over its node budget of %d (htn.budget.nodes)", goal, be.Used, be.Budget)
	default:
		code = planbus.CodeHTNStepBudget
		msg = fmt.Sprintf("planning %s took %d resolver steps, over its step budget of %d", goal, be.Used, be.Budget)
	}
	return &Error{Code: code, Category: planbus.CategoryPermanent, Message: msg}
}

// operatorSkills maps an operator to the skill that performs it: a skill
// whose manifest lists it, else the skill of the same name.
func operatorSkills(ms map[string]planbus.SkillManifest) func(string) string {
	bound := map[string]string{}
	for _, name := range SortedKeys(ms) {
		for _, op := range ms[name].Operators {
			if _, taken := bound[op]; !taken {
				bound[op] = name
			}
		}
	}
	return func(op string) string {
		if s, ok := bound[op]; ok {
			return s
		}
		return op
	}
}

func HasSkill(ms map[string]planbus.SkillManifest, name string) bool {
	_, ok := ms[name]
	return ok
}

type htnStep struct {
	Tool     string         `json:"tool,omitempty"`
	Operator string         `json:"operator"`
	Hidden   bool           `json:"hidden,omitempty"`
	Trace    []htnTraceStep `json:"trace,omitempty"`
}

type htnTraceStep struct {
	Task     string            `json:"task"`
	Method   string            `json:"method"`
	Line     int               `json:"line"`
	Bindings map[string]string `json:"bindings,omitempty"`
}

// htnToPlan turns a plan's operators into a chain of tools: HTN plans are
// totally ordered. Positional arguments become named input through the
// skill manifest's parameters, or {"args": [...]} without them. The
// plan's metadata.htn holds the goal, the domain, each operator's trace
// and, when the request asked for it, the search (nil: none).
func htnToPlan(p htn.Plan, r *request.HTNRequest, bind func(string) string, ms map[string]planbus.SkillManifest, search *htnSearch) (*plan.Plan, error) {
	type tool struct {
		ToolID       string         `json:"toolId"`
		Skill        string         `json:"skill"`
		Input        map[string]any `json:"input"`
		Dependencies []string       `json:"dependencies"`
		Description  string         `json:"description"`
	}
	var tools []tool
	var steps []htnStep
	prev := ""
	for _, op := range p.Operators() {
		st := htnStep{Operator: op.String(), Hidden: op.Hidden}
		for _, s := range op.Trace() {
			ts := htnTraceStep{Task: s.Task.String(), Method: s.Method, Line: s.Line}
			for _, b := range s.Bindings {
				if ts.Bindings == nil {
					ts.Bindings = map[string]string{}
				}
				ts.Bindings["?"+b.Var] = b.Value.String()
			}
			st.Trace = append(st.Trace, ts)
		}
		if !op.Hidden {
			skill := bind(op.Name)
			id := fmt.Sprintf("%d-%s", len(tools)+1, toolIDSafe(op.Name))
			input := map[string]any{}
			params := ms[skill].Parameters
			args := make([]any, len(op.Args))
			for i, a := range op.Args {
				args[i] = termValue(a)
			}
			if len(params) >= len(args) && len(params) > 0 {
				for i, a := range args {
					input[params[i]] = a
				}
			} else if len(args) > 0 {
				input["args"] = args
			}
			deps := []string{}
			if prev != "" {
				deps = []string{prev}
			}
			tools = append(tools, tool{ToolID: id, Skill: skill, Input: input, Dependencies: deps, Description: op.String()})
			st.Tool, prev = id, id
		}
		steps = append(steps, st)
	}
	hm := map[string]any{"goal": r.Goal, "domain": r.Domain, "operators": steps}
	if search != nil {
		hm["search"] = search
	}
	meta, _ := json.Marshal(map[string]any{"htn": hm})
	doc, err := json.Marshal(map[string]any{"tools": tools, "metadata": json.RawMessage(meta)})
	if err != nil {
		return nil, err
	}
	pl, err := plan.Decode(doc)
	if err != nil {
		return nil, &Error{Code: planbus.CodeInvalidPlan, Category: planbus.CategoryInternal, Message: err.Error()}
	}
	return pl, nil
}

// termValue gives an operator argument as JSON: numbers as numbers, lists
// as arrays, everything else as its printed text.
func termValue(t htn.Term) any {
	switch t.Kind {
	case htn.Integer, htn.Float:
		return json.Number(t.Name)
	case htn.Compound:
		if t.Name == "." && len(t.Args) == 2 {
			var out []any
			for t.Kind == htn.Compound && t.Name == "." && len(t.Args) == 2 {
				out = append(out, termValue(t.Args[0]))
				t = t.Args[1]
			}
			return out
		}
	}
	return t.String()
}

func toolIDSafe(s string) string {
	var b strings.Builder
	for _, c := range s {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':' {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	out := b.String()
	if len(out) > 100 {
		out = out[:100]
	}
	return out
}

func SortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
