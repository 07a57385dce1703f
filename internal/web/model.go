package web

import (
	"encoding/json"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/dag"
)

// planModel is what the view knows of one plan: its definition, each
// tool's state and attempts, and the plan's end. It is built from the
// plan's stored state, the events of its run and its execution result,
// in any order: each source only moves a tool forward (see toolView.key),
// so an event read back after the state it led to changes nothing. It
// is not safe for concurrent use.
type planModel struct {
	PlanID      string
	RequestID   string
	SessionID   string
	Description string
	State       planbus.PlanState // planbus.PlanRunning or how it ended; "" before it started
	StartedAt   time.Time
	FinishedAt  time.Time
	Error       *planbus.ErrorInfo
	// OutputsOmitted: the execution result left the outputs out (too
	// large for one message).
	OutputsOmitted bool
	Tools          []*toolView

	index map[string]int
	graph *dag.Graph // nil if the definition is not a DAG (never, for a stored plan)
}

// toolView is one tool of a plan.
type toolView struct {
	ID          string
	Skill       string // of the latest attempt (its fallback's once it runs)
	Description string
	Deps        []string
	Required    bool
	Input       json.RawMessage
	TimeoutMs   int64
	MaxAttempts int
	Fallback    string

	State    planbus.ToolState
	Attempt  int
	Reason   planbus.Reason
	Error    *planbus.ErrorInfo
	WorkerID string
	Output   json.RawMessage
	// FirstAt is when the tool's first attempt was released (or started);
	// EndedAt when it ended; DurationMs is its last attempt's run on a
	// worker.
	FirstAt    time.Time
	EndedAt    time.Time
	DurationMs float64
	Attempts   []*attemptView
}

// attemptView is one attempt of a tool, from the events of the run.
type attemptView struct {
	N          int
	Skill      string
	ReleasedAt time.Time
	StartedAt  time.Time
	EndedAt    time.Time
	State      planbus.ToolState
	WorkerID   string
	DurationMs float64
	Error      *planbus.ErrorInfo
	DelayMs    int64 // retrying: the wait before the next attempt
}

// rank orders a tool's states within one attempt.
func rank(state planbus.ToolState) int {
	switch state {
	case planbus.ToolPending, "":
		return 0
	case planbus.ToolWaitingApproval:
		return 1
	case planbus.ToolRunning:
		return 2
	case planbus.ToolRetrying:
		return 3
	}
	return 4 // ended
}

// key orders what is known of a tool: a later attempt, or a later state
// within the same attempt, is newer.
func key(attempt int, state planbus.ToolState) int { return attempt*5 + rank(state) }

// ended reports whether a tool state is final.
func ended(state planbus.ToolState) bool { return rank(state) == 4 }

// newModel makes the model of a plan from its definition; every tool is
// pending.
func newModel(def *planDef) *planModel {
	m := &planModel{PlanID: def.PlanID, RequestID: def.RequestID, SessionID: def.SessionID, Description: def.Description,
		index: make(map[string]int, len(def.Tools))}
	nodes := make([]dag.Node, len(def.Tools))
	for i, t := range def.Tools {
		tv := &toolView{ID: t.ToolID, Skill: t.Skill, Description: t.Description, Deps: t.Dependencies, Required: t.required(),
			Input: t.Input, TimeoutMs: t.TimeoutMs, MaxAttempts: 1, State: planbus.ToolPending}
		if t.RetryPolicy != nil && t.RetryPolicy.MaxAttempts > 0 {
			tv.MaxAttempts = t.RetryPolicy.MaxAttempts
		}
		if t.Fallback != nil {
			tv.Fallback = t.Fallback.Skill
		}
		m.Tools = append(m.Tools, tv)
		m.index[t.ToolID] = i
		nodes[i] = dag.Node{ID: t.ToolID, Deps: t.Dependencies}
	}
	if g, err := dag.New(nodes); err == nil {
		m.graph = g
	}
	return m
}

// tool returns the tool with the id, or nil.
func (m *planModel) tool(id string) *toolView {
	if i, ok := m.index[id]; ok {
		return m.Tools[i]
	}
	return nil
}

// advance moves the tool to state at attempt unless what is known is
// newer. current reports whether the tool is now at that attempt and
// state (so what else is said of them applies); changed, whether it moved.
func (t *toolView) advance(attempt int, state planbus.ToolState) (current, changed bool) {
	if key(attempt, state) < key(t.Attempt, t.State) {
		return false, false
	}
	changed = attempt != t.Attempt || state != t.State
	t.Attempt, t.State = attempt, state
	return true, changed
}

// applyStatus takes in the plan's stored state.
func (m *planModel) applyStatus(ps *client.PlanStatus) {
	if ps == nil {
		return
	}
	if m.State == "" || m.State == planbus.PlanRunning {
		m.State = ps.State
	}
	if m.StartedAt.IsZero() {
		m.StartedAt = ps.StartedAt
	}
	if !ps.FinishedAt.IsZero() {
		m.FinishedAt = ps.FinishedAt
	}
	if ps.Error != nil {
		m.Error = ps.Error
	}
	for _, ts := range ps.Tools {
		t := m.tool(ts.ToolID)
		if t == nil {
			continue
		}
		if current, _ := t.advance(ts.Attempt, ts.State); !current {
			continue
		}
		t.Skill, t.Reason = ts.Skill, ts.Reason
		if ts.Error != nil {
			t.Error = ts.Error
		}
		switch {
		case ended(ts.State) && !ts.At.IsZero():
			t.EndedAt = ts.At
		case ts.State == planbus.ToolRunning && t.FirstAt.IsZero():
			t.FirstAt = ts.At
		}
	}
}

// applyExecution takes in the plan's execution result: how each tool
// ended, with its output.
func (m *planModel) applyExecution(res *planbus.ExecutionResult) {
	if res == nil {
		return
	}
	m.State, m.Error, m.OutputsOmitted = res.State, res.Error, res.OutputsOmitted
	if !res.StartedAt.IsZero() {
		m.StartedAt = res.StartedAt
	}
	if !res.FinishedAt.IsZero() {
		m.FinishedAt = res.FinishedAt
	}
	for _, to := range res.Tools {
		t := m.tool(to.ToolID)
		if t == nil {
			continue
		}
		t.advance(to.Attempts, to.State)
		t.State, t.Skill, t.Output, t.Reason = to.State, to.Skill, to.Output, to.Reason
		if to.Error != nil {
			t.Error = to.Error
		}
		if to.WorkerID != "" {
			t.WorkerID = to.WorkerID
		}
		if to.DurationMs > 0 {
			t.DurationMs = to.DurationMs
		}
		if t.FirstAt.IsZero() && !to.StartedAt.IsZero() {
			t.FirstAt = to.StartedAt
		}
		if !to.FinishedAt.IsZero() {
			t.EndedAt = to.FinishedAt
		}
	}
}

// toolStates maps event types to the tool state they lead to.
var toolStates = map[planbus.EventType]planbus.ToolState{
	planbus.EventToolReleased:  planbus.ToolRunning,
	planbus.EventToolStarted:   planbus.ToolRunning,
	planbus.EventToolSucceeded: planbus.ToolSucceeded,
	planbus.EventToolFailed:    planbus.ToolFailed,
	planbus.EventToolRetrying:  planbus.ToolRetrying,
	planbus.EventToolTimeout:   planbus.ToolTimeout,
	planbus.EventToolSkipped:   planbus.ToolSkipped,
	planbus.EventToolCancelled: planbus.ToolCancelled,
	planbus.EventToolWaiting:   planbus.ToolWaitingApproval,
	planbus.EventToolRejected:  planbus.ToolFailed,
	planbus.EventToolReused:    planbus.ToolSucceeded,
}

// planStates maps plan event types to the plan state they lead to.
var planStates = map[planbus.EventType]planbus.PlanState{
	planbus.EventPlanStarted:   planbus.PlanRunning,
	planbus.EventPlanSucceeded: planbus.PlanSucceeded,
	planbus.EventPlanFailed:    planbus.PlanFailed,
	planbus.EventPlanTimeout:   planbus.PlanTimeout,
	planbus.EventPlanCancelled: planbus.PlanCancelled,
	planbus.EventPlanRejected:  planbus.PlanRejected,
}

// apply takes in one event of the plan's run. It returns the tool whose
// state, attempt, skill, worker or duration it changed (nil if none) and
// whether the plan's state changed.
func (m *planModel) apply(ev planbus.Event) (changed *toolView, planChanged bool) {
	if ev.PlanID != "" && ev.PlanID != m.PlanID {
		return nil, false
	}
	if st, ok := planStates[ev.Type]; ok {
		if m.State == "" || m.State == planbus.PlanRunning {
			planChanged = m.State != st
			m.State = st
		}
		if ev.Type == planbus.EventPlanStarted && m.StartedAt.IsZero() {
			m.StartedAt = ev.Time
		} else if st != planbus.PlanRunning {
			m.FinishedAt = ev.Time
			if ev.Error != nil {
				m.Error = ev.Error
			}
		}
		return nil, planChanged
	}
	st, ok := toolStates[ev.Type]
	t := m.tool(ev.ToolID)
	if !ok || t == nil {
		return nil, false
	}
	a := t.attempt(ev.Attempt)
	if ev.Skill != "" {
		a.Skill = ev.Skill
	}
	switch ev.Type {
	case planbus.EventToolReleased:
		a.ReleasedAt = ev.Time
	case planbus.EventToolStarted:
		a.StartedAt, a.WorkerID = ev.Time, ev.WorkerID
	case planbus.EventToolRetrying:
		a.State, a.Error, a.DelayMs = planbus.ToolFailed, ev.Error, ev.DelayMs
		if a.EndedAt.IsZero() {
			a.EndedAt = ev.Time
		}
	default:
		a.State, a.EndedAt, a.Error = st, ev.Time, ev.Error
		if ev.WorkerID != "" {
			a.WorkerID = ev.WorkerID
		}
		if ev.DurationMs > 0 {
			a.DurationMs = ev.DurationMs
		}
	}
	if (ev.Type == planbus.EventToolReleased || ev.Type == planbus.EventToolStarted) && (t.FirstAt.IsZero() || ev.Time.Before(t.FirstAt)) {
		t.FirstAt = ev.Time
	}
	before := update(t)
	current, _ := t.advance(ev.Attempt, st)
	if !current {
		return nil, false
	}
	if ev.Skill != "" {
		t.Skill = ev.Skill
	}
	if ev.WorkerID != "" {
		t.WorkerID = ev.WorkerID
	}
	if ev.Error != nil {
		t.Error = ev.Error
	}
	if ended(st) {
		t.EndedAt, t.Reason = ev.Time, planbus.Reason(ev.Message)
		if ev.DurationMs > 0 {
			t.DurationMs = ev.DurationMs
		}
	}
	if update(t) == before {
		return nil, false
	}
	return t, false
}

// attempt returns the tool's attempt n, adding it when new. Attempt 0
// (a tool skipped before it ran) is kept apart from the real ones.
func (t *toolView) attempt(n int) *attemptView {
	for _, a := range t.Attempts {
		if a.N == n {
			return a
		}
	}
	a := &attemptView{N: n}
	t.Attempts = append(t.Attempts, a)
	for i := len(t.Attempts) - 1; i > 0 && t.Attempts[i-1].N > n; i-- {
		t.Attempts[i-1], t.Attempts[i] = t.Attempts[i], t.Attempts[i-1]
	}
	return a
}

// span is how long the tool has taken: from its first release to its
// end, or to now while it runs; 0 if it never ran. Retries and the waits
// between them count, as they delay the tool's dependents.
func (t *toolView) span(now time.Time) time.Duration {
	if t.FirstAt.IsZero() {
		if t.DurationMs > 0 {
			return time.Duration(t.DurationMs * float64(time.Millisecond))
		}
		return 0
	}
	end := t.EndedAt
	if end.IsZero() {
		if ended(t.State) {
			return time.Duration(t.DurationMs * float64(time.Millisecond))
		}
		end = now
	}
	return max(end.Sub(t.FirstAt), 0)
}

// critical returns the ids of the tools on the plan's critical path: the
// chain of dependencies whose spans add up to the most (see
// dag.CriticalPath).
func (m *planModel) critical(now time.Time) []string {
	if m.graph == nil {
		return nil
	}
	var out []string
	for _, i := range m.graph.CriticalPath(func(i int) int64 { return int64(m.Tools[i].span(now)) }) {
		out = append(out, m.Tools[i].ID)
	}
	return out
}

// counts are the plan's tools by state.
func (m *planModel) counts() map[planbus.ToolState]int {
	c := map[planbus.ToolState]int{}
	for _, t := range m.Tools {
		c[t.State]++
	}
	return c
}
