package execution

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/dag"
	"github.com/planbus/planbus/internal/gate"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/text"
)

// Timer kinds.
const (
	TimerRetry       = "retry"
	TimerPlanTimeout = "timeout"
	// TimerCancel is not a timer but a command that travels the same
	// durable way: a planner asks the dispatchers to cancel a plan (see
	// Cancel). It is due at once.
	TimerCancel = "cancel"
	// TimerApprove and TimerReject are commands too: a planner hands the
	// dispatchers a person's decision on a tool waiting for approval
	// (Timer.Index), with its reason. They are due at once.
	TimerApprove = "approve"
	TimerReject  = "reject"
)

// Release asks for attempt Attempt of tool Index to be published.
type Release struct {
	Index   int
	Attempt int
	// TimeoutMs is the time the call gets on a worker: the attempt's
	// timeoutMs, times the skill's TimeoutFactor (at most a day).
	TimeoutMs int64
}

// TimeoutFactor tells how many times its attempt's timeout a call to
// skill gets in a session. The engine asks it when it releases a call:
// the dispatcher answers more than 1 for a skill whose health is degraded,
// in the hope that a slow skill still answers. It must answer from
// memory, without blocking; an answer below 1, or a nil TimeoutFactor,
// leaves every timeout as the plan says. (The engine knows no more of
// skill health than this.)
type TimeoutFactor func(sessionID, skill string) int64

// Timer asks for OnTimer to be called at FireAt.
type Timer struct {
	Kind    string
	Index   int // the tool, for retries
	Attempt int // the attempt to release, for retries
	FireAt  time.Time
	Reason  string // why, for cancels, approvals and rejections
}

// Effects are what the caller must carry out after an Engine call, in this
// order: persist State (if Changed); then publish Events, which are best
// effort and may go first, and Releases, Timers and Done; once those are
// stored, tell workers to stop the plan's running calls (if Cancel).
// Applied lists the results that changed the state, for skill health and
// session state: as the engine applied them, so a succeeded result whose
// output its gate refused appears failed with code VERIFY_FAILED.
type Effects struct {
	Changed  bool
	Releases []Release
	Timers   []Timer
	Events   []planbus.Event
	Done     *planbus.ExecutionResult
	Cancel   bool
	Applied  []Applied
}

// Applied is a result the engine accepted.
type Applied struct {
	Index  int
	Result *planbus.ToolResult
	// Final: the attempt failed and the tool will not be retried.
	Final bool
}

func (fx *Effects) merge(o Effects) {
	fx.Changed = fx.Changed || o.Changed
	fx.Releases = append(fx.Releases, o.Releases...)
	fx.Timers = append(fx.Timers, o.Timers...)
	fx.Events = append(fx.Events, o.Events...)
	fx.Applied = append(fx.Applied, o.Applied...)
	if o.Done != nil {
		fx.Done = o.Done
	}
	fx.Cancel = fx.Cancel || o.Cancel
}

// Merge adds o's effects to fx, for callers that apply several events
// before carrying out their effects at once.
func (fx *Effects) Merge(o Effects) { fx.merge(o) }

// Dedupe drops releases of a call already released in fx, and timers
// already set in fx (those with one message id), keeping the first:
// after merging Outstanding into effects that released a call, the call
// is there twice, and publishing both in one batch makes a replicated
// stream refuse the second as "in process" under its message id.
func (fx *Effects) Dedupe() {
	type call struct{ index, attempt int }
	seen := map[call]bool{}
	fx.Releases = slices.DeleteFunc(fx.Releases, func(r Release) bool {
		k := call{r.Index, r.Attempt}
		dup := seen[k]
		seen[k] = true
		return dup
	})
	// A plan has one timeout, the last asked for (an approval moves it).
	fx.Timers = lastTimeout(fx.Timers)
	set := map[string]bool{}
	fx.Timers = slices.DeleteFunc(fx.Timers, func(t Timer) bool {
		k := t.Message("").MsgID() // timers with one message id are one message
		dup := set[k]
		set[k] = true
		return dup
	})
}

// lastTimeout keeps the last plan timeout of timers, the others as they
// are: a plan has one deadline, the latest asked for.
func lastTimeout(timers []Timer) []Timer {
	last := -1
	for i, t := range timers {
		if t.Kind == TimerPlanTimeout {
			last = i
		}
	}
	out := timers[:0]
	for i, t := range timers {
		if t.Kind != TimerPlanTimeout || i == last {
			out = append(out, t)
		}
	}
	return out
}

// Engine runs one plan.
type Engine struct {
	plan     *plan.Plan
	g        *dag.Graph
	st       *State
	tracker  *dag.Tracker
	inFlight int // tools running or waiting to retry
	sync     int // non-async tools in flight
	finished int // tools in a terminal state
	fx       Effects
	now      time.Time
	timeouts TimeoutFactor
	// approved holds tools approved while waiting, in the order of
	// their approvals, to be released before the tracker's ready tools.
	approved []int
	// popped counts the tracker's pops, scanned the ready tools hold has
	// looked at: together they say which ready tools are new to it.
	popped, scanned int
	// maxLife bounds a plan's life whatever its approvals wait (SetMaxLife).
	maxLife time.Duration
}

// SetMaxLife bounds how long the plan may run from its start, however
// long its approval steps wait (the plan's clock stands while one waits):
// past it the plan times out even while a tool waits. The dispatcher sets
// it to what the store keeps a plan's messages for, so that no plan
// outlives its own state. 0 (the default) sets no bound.
func (e *Engine) SetMaxLife(d time.Duration) { e.maxLife = d }

// lifeEnd is the plan's latest end (Unix ms), or 0 for none.
func (e *Engine) lifeEnd() int64 {
	if e.maxLife <= 0 {
		return 0
	}
	return e.st.StartedAt + e.maxLife.Milliseconds()
}

// Reused is an earlier result a tool takes as its own instead of running
// (plan.Tool.ReuseFrom): the result, as the RESULTS stream holds it at
// Seq.
type Reused struct {
	Result *planbus.ToolResult
	Seq    uint64
}

// Start begins a run of p at now. defaultMaxConcurrency applies when the
// plan sets none; timeouts (which may be nil) lengthens the calls of
// slow skills. p must come from plan.Decode or have passed p.Check.
func Start(p *plan.Plan, now time.Time, defaultMaxConcurrency int, timeouts TimeoutFactor) (*Engine, Effects) {
	return StartReusing(p, now, defaultMaxConcurrency, timeouts, nil)
}

// StartReusing is Start with earlier results, by tool index, that tools
// take as their own instead of running (a replan's reuse, see
// plan.Tool.ReuseFrom): such a tool is succeeded at once, with
// Reused set, the result's output and an event tool.reused. A result is
// taken only if it succeeded, on the skill the tool's attempt of that
// number runs, its output passes that attempt's gate, the tool does not
// say reuse false, and every tool it depends on was reused too (a
// dependency that runs again may give another output); otherwise the tool
// runs.
func StartReusing(p *plan.Plan, now time.Time, defaultMaxConcurrency int, timeouts TimeoutFactor, reused map[int]Reused) (*Engine, Effects) {
	return StartWithin(p, now, defaultMaxConcurrency, timeouts, reused, 0)
}

// StartWithin is StartReusing with the plan's longest life, approvals'
// waits included (SetMaxLife).
func StartWithin(p *plan.Plan, now time.Time, defaultMaxConcurrency int, timeouts TimeoutFactor, reused map[int]Reused, maxLife time.Duration) (*Engine, Effects) {
	mc := p.MaxConcurrency
	if mc <= 0 {
		mc = max(defaultMaxConcurrency, 1)
	}
	if !p.Parallel {
		mc = 1
	}
	st := &State{
		PlanID: p.PlanID, RequestID: p.RequestID, SessionID: p.SessionID, Status: planbus.PlanRunning, MaxConcurrency: mc,
		StartedAt: now.UnixMilli(), Deadline: now.Add(time.Duration(p.TimeoutMs) * time.Millisecond).UnixMilli(),
		Tools: make([]ToolState, len(p.Tools)),
	}
	for i, t := range p.Tools {
		st.Tools[i] = ToolState{ID: t.ToolID, State: planbus.ToolPending}
	}
	e := &Engine{plan: p, g: p.Graph(), st: st, tracker: dag.NewTracker(p.Graph()), timeouts: timeouts, maxLife: maxLife}
	e.begin(now)
	e.fx.Changed = true
	e.event(planbus.Event{Type: planbus.EventPlanStarted, Tools: len(p.Tools),
		Message: fmt.Sprintf("%s, at most %d at once", plural(len(p.Tools), "tool"), mc)})
	e.fx.Timers = append(e.fx.Timers, Timer{Kind: TimerPlanTimeout, FireAt: time.UnixMilli(st.Deadline)})
	e.reuse(reused)
	e.fill()
	e.checkDone()
	return e, e.end()
}

// reuse applies the earlier results a plan starts with, in Kahn order so
// that a tool's dependencies are settled before it.
func (e *Engine) reuse(reused map[int]Reused) {
	for _, i := range e.g.Order() {
		r, ok := reused[i]
		t, ts := &e.plan.Tools[i], &e.st.Tools[i]
		if !ok || r.Result == nil || t.NoReuse || !e.reusable(i, r.Result) {
			continue
		}
		res := r.Result
		e.st.touch(i)
		ts.State, ts.Reused, ts.Attempt, ts.ResultSeq, ts.FinishedAt = planbus.ToolSucceeded, true, max(res.Attempt, 1), r.Seq, e.ms()
		ts.setResult(res)
		if !res.FinishedAt.IsZero() {
			ts.FinishedAt = res.FinishedAt.UnixMilli()
		}
		e.finished++
		e.tracker.Satisfy(i)
		e.toolEvent(planbus.EventToolReused, i, planbus.Event{WorkerID: res.WorkerID, DurationMs: res.DurationMs,
			Message: fmt.Sprintf("took the output of tool %q of plan %s instead of running", res.ToolID, res.PlanID)})
	}
}

// reusable: tool i may take res as its own.
func (e *Engine) reusable(i int, res *planbus.ToolResult) bool {
	for _, d := range e.g.Deps(i) {
		if !e.st.Tools[d].Reused {
			return false
		}
	}
	t := &e.plan.Tools[i]
	n := max(res.Attempt, 1)
	if res.State != planbus.ToolSucceeded || t.Variant(n).Skill != res.Skill {
		return false
	}
	_, refused := e.verified(i, res)
	return !refused
}

// Restore rebuilds an engine from a stored state; timeouts is as for Start.
func Restore(p *plan.Plan, st *State, timeouts TimeoutFactor) (*Engine, error) {
	if len(st.Tools) != len(p.Tools) {
		return nil, fmt.Errorf("execution: plan %s: state has %d tools, plan has %d", p.PlanID, len(st.Tools), len(p.Tools))
	}
	e := &Engine{plan: p, g: p.Graph(), st: st, tracker: dag.NewTracker(p.Graph()), timeouts: timeouts}
	for _, i := range e.g.Order() {
		ts := st.Tools[i]
		if ts.ID != p.Tools[i].ToolID {
			return nil, fmt.Errorf("execution: plan %s: state tool %d is %q, plan has %q", p.PlanID, i, ts.ID, p.Tools[i].ToolID)
		}
		if e.satisfies(i) {
			e.tracker.Satisfy(i)
		}
		if inFlight(ts.State) {
			e.inFlight++
			if !p.Tools[i].Async {
				e.sync++
			}
		}
		if terminal(ts.State) {
			e.finished++
		}
	}
	return e, nil
}

// satisfies: tool i finished in a way that lets its dependents run.
func (e *Engine) satisfies(i int) bool {
	switch e.st.Tools[i].State {
	case planbus.ToolSucceeded:
		return true
	case planbus.ToolFailed, planbus.ToolTimeout:
		return !e.plan.Tools[i].Required
	}
	return false
}

// State returns the current state. The caller must not modify it.
func (e *Engine) State() *State { return e.st }

// Plan returns the plan being run.
func (e *Engine) Plan() *plan.Plan { return e.plan }

// Done reports whether the plan has ended.
func (e *Engine) Done() bool { return e.st.Status != planbus.PlanRunning }

func (e *Engine) begin(now time.Time) { e.now, e.fx = now, Effects{} }

func (e *Engine) end() Effects {
	fx := e.fx
	e.fx = Effects{}
	// One plan timeout at most, the last asked for: a clock that stopped
	// or ran again in the same call replaces the one set before it.
	fx.Timers = lastTimeout(fx.Timers)
	return fx
}

func (e *Engine) ms() int64 { return e.now.UnixMilli() }

func (e *Engine) event(ev planbus.Event) {
	ev.Time, ev.RequestID, ev.PlanID = e.now, e.st.RequestID, e.st.PlanID
	e.fx.Events = append(e.fx.Events, ev)
}

func (e *Engine) toolEvent(typ planbus.EventType, i int, ev planbus.Event) {
	if ev.Attempt == 0 {
		ev.Attempt = e.st.Tools[i].Attempt
	}
	ev.Type, ev.ToolID, ev.Skill = typ, e.plan.Tools[i].ToolID, e.skillOf(i, ev.Attempt)
	e.event(ev)
}

// skillOf is the skill attempt n of tool i runs: the fallback's once the
// tool's own attempts are used up.
func (e *Engine) skillOf(i, n int) string { return e.plan.Tools[i].Variant(max(n, 1)).Skill }

// fill puts ready tools that need approval in waiting_approval, then
// releases ready tools while slots are free: approved ones first, then in
// the order they became ready, none while a non-async tool runs, a
// non-async one only alone.
func (e *Engine) fill() {
	if e.Done() {
		return
	}
	e.hold()
	for e.inFlight < e.st.MaxConcurrency && e.sync == 0 {
		i, ok := e.next()
		if !ok {
			return
		}
		e.release(i, 1)
	}
}

// next takes the next tool to release, if any.
func (e *Engine) next() (int, bool) {
	for len(e.approved) > 0 {
		i := e.approved[0]
		e.approved = e.approved[1:]
		if e.st.Tools[i].State == planbus.ToolPending {
			return i, true
		}
	}
	for {
		i, ok := e.tracker.Pop()
		if !ok {
			return 0, false
		}
		e.popped++
		// Others were released before a restore, skipped, reused, or
		// wait for approval.
		if e.st.Tools[i].State == planbus.ToolPending && !e.unapproved(i) {
			return i, true
		}
	}
}

// unapproved: tool i has an approval step and was not approved.
func (e *Engine) unapproved(i int) bool {
	return e.plan.Tools[i].Approval != nil && !e.st.Tools[i].Approved
}

// hold puts the tools that became ready since it last looked, and need
// an approval, in waiting_approval. They hold no slot while they wait: a
// person may take hours, and the plan's other tools go on.
func (e *Engine) hold() {
	ready := e.tracker.Ready()
	for _, i := range ready[min(max(e.scanned-e.popped, 0), len(ready)):] {
		if ts := &e.st.Tools[i]; ts.State == planbus.ToolPending && e.unapproved(i) {
			e.st.touch(i)
			ts.State = planbus.ToolWaitingApproval
			e.fx.Changed = true
			if e.st.WaitingSince == 0 {
				e.st.WaitingSince = e.ms() // the plan's clock stops
				if end := e.lifeEnd(); end != 0 {
					e.fx.Timers = append(e.fx.Timers, Timer{Kind: TimerPlanTimeout, FireAt: time.UnixMilli(end)})
				}
			}
			e.toolEvent(planbus.EventToolWaiting, i, planbus.Event{Message: e.plan.Tools[i].Approval.Prompt})
		}
	}
	e.scanned = e.popped + len(ready)
}

func (e *Engine) release(i, attempt int) {
	e.st.touch(i)
	ts := &e.st.Tools[i]
	if ts.State == planbus.ToolPending {
		e.inFlight++
		if !e.plan.Tools[i].Async {
			e.sync++
		}
	}
	ts.State, ts.Attempt, ts.ReleasedAt, ts.RetryAt = planbus.ToolRunning, attempt, e.ms(), 0
	e.fx.Changed = true
	e.fx.Releases = append(e.fx.Releases, e.releaseOf(i, attempt))
	e.toolEvent(planbus.EventToolReleased, i, planbus.Event{})
}

// releaseOf is the release of attempt n of tool i, with the timeout its
// call gets.
func (e *Engine) releaseOf(i, n int) Release {
	v := e.plan.Tools[i].Variant(n)
	timeout := v.TimeoutMs
	if e.timeouts != nil {
		if f := e.timeouts(e.st.SessionID, v.Skill); f > 1 {
			timeout = min(timeout*f, plan.MaxTimeoutMs)
		}
	}
	return Release{Index: i, Attempt: n, TimeoutMs: timeout}
}

// GateStepsPerSecond is a plan's verification budget (see
// gate.CheckWithin) for each second of its timeout: its gates together may
// take about a fifth of the time the plan may run, so that a plan whose
// gates are built to take long cannot hold its dispatcher much past its
// timeout, nor the plans it shares one with. Each output's check takes at
// most gate.DefaultSteps of it.
const GateStepsPerSecond = gate.DefaultSteps

// GateBudget is the verification budget of the plan.
func (e *Engine) GateBudget() int64 {
	return max(gate.DefaultSteps, e.plan.TimeoutMs*GateStepsPerSecond/1000)
}

// verified is r as the engine applies it to tool i: a succeeded result
// whose output the gate of its attempt refuses is a failed one (see
// gate.VerifyResult), its check charged to the plan's verification
// budget; refused reports whether the gate refused it. r itself is not
// changed. Charges depend on the results applied and their order alone,
// so the stored state that follows a batch is the same wherever it is
// applied.
func (e *Engine) verified(i int, r *planbus.ToolResult) (out *planbus.ToolResult, refused bool) {
	if r.State != planbus.ToolSucceeded {
		return r, false
	}
	g := e.plan.Tools[i].Gate(max(r.Attempt, 1))
	if g == nil {
		return r, false
	}
	left := e.GateBudget() - e.st.GateSteps
	if left <= 0 {
		v := *r
		v.State = planbus.ToolFailed
		v.Error = &planbus.ErrorInfo{Code: planbus.CodeVerifyFailed, Category: planbus.CategoryPermanent,
			Message: fmt.Sprintf("verification failed: the plan's gates have used up its verification budget of %d steps (%d a second of its timeout); gate %s was not checked",
				e.GateBudget(), GateStepsPerSecond, text.Clip(g.String(), 80))}
		return &v, true
	}
	v, ok, used := gate.VerifyResult(*r, g, min(left, gate.DefaultSteps))
	e.st.GateSteps += used
	if ok {
		return r, false
	}
	return &v, true
}

// leave frees tool i's slot as it reaches terminal state s.
func (e *Engine) leave(i int, s planbus.ToolState) {
	e.st.touch(i)
	ts := &e.st.Tools[i]
	if inFlight(ts.State) {
		e.inFlight--
		if !e.plan.Tools[i].Async {
			e.sync--
		}
	}
	if !terminal(ts.State) {
		e.finished++
	}
	ts.State, ts.FinishedAt, ts.RetryAt = s, e.ms(), 0
	e.fx.Changed = true
}

// Index returns the position of a tool in the plan.
func (e *Engine) Index(toolID string) (int, bool) { return e.g.Index(toolID) }

// OnResult applies a worker's result. A result for an attempt that is not
// running (a duplicate, or one from before a retry or after the plan ended)
// changes nothing. A succeeded result is first checked against the gate
// of its attempt (the tool's verify, or its fallback's): an output the
// gate refuses makes it a failed attempt with code VERIFY_FAILED and
// category transient, so the retry policy, the fallback and the failure
// semantics apply as to any failure.
func (e *Engine) OnResult(r *planbus.ToolResult, now time.Time) Effects {
	return e.OnResultSeq(r, 0, now)
}

// OnResultSeq is OnResult for a result stored in the RESULTS stream at seq,
// which the state records so Load can find the result again.
func (e *Engine) OnResultSeq(r *planbus.ToolResult, seq uint64, now time.Time) Effects {
	e.begin(now)
	i, ok := e.g.Index(r.ToolID)
	if !ok || e.Done() {
		return e.end()
	}
	ts := &e.st.Tools[i]
	if ts.State != planbus.ToolRunning || ts.Attempt != r.Attempt {
		return e.end()
	}
	e.st.touch(i)
	t := &e.plan.Tools[i]
	r, ts.Refused = e.verified(i, r)
	ts.setResult(r)
	ts.ResultSeq = seq
	if r.State == planbus.ToolSucceeded {
		e.fx.Applied = append(e.fx.Applied, Applied{Index: i, Result: r})
		e.leave(i, planbus.ToolSucceeded)
		e.toolEvent(planbus.EventToolSucceeded, i, planbus.Event{DurationMs: r.DurationMs, WorkerID: r.WorkerID})
		e.tracker.Satisfy(i)
		e.fill()
		e.checkDone()
		return e.end()
	}
	errInfo := r.Error
	if errInfo == nil {
		errInfo = &planbus.ErrorInfo{Code: planbus.CodeToolFailed, Category: planbus.CategoryInternal, Message: "failed without an error"}
	}
	ts.Error = errInfo
	v := t.Variant(r.Attempt)
	retry := planbus.Retryable(errInfo.Category) && v.Attempt < v.RetryPolicy.MaxAttempts
	// Final: this skill gets no more attempts here (its health counts it
	// as retries exhausted), even if a fallback takes over.
	e.fx.Applied = append(e.fx.Applied, Applied{Index: i, Result: r, Final: !retry})
	if retry {
		delay := RetryDelay(v.RetryPolicy, v.Attempt)
		ts.State, ts.RetryAt = planbus.ToolRetrying, now.Add(delay).UnixMilli()
		e.fx.Changed = true
		e.fx.Timers = append(e.fx.Timers, Timer{Kind: TimerRetry, Index: i, Attempt: r.Attempt + 1, FireAt: now.Add(delay)})
		e.toolEvent(planbus.EventToolRetrying, i, planbus.Event{Error: errInfo, DelayMs: delay.Milliseconds(),
			Message: fmt.Sprintf("attempt %d of %d failed; retrying in %s", v.Attempt, v.RetryPolicy.MaxAttempts, delay)})
		return e.end()
	}
	if t.Fallback != nil && !v.Fallback {
		// The tool's own attempts are over: its fallback takes the slot at
		// once, whatever the error was, since it is another way to the
		// same end.
		e.toolEvent(planbus.EventToolRetrying, i, planbus.Event{Error: errInfo,
			Message: fmt.Sprintf("attempt %d of %d failed; falling back to skill %s", v.Attempt, v.RetryPolicy.MaxAttempts, t.Fallback.Skill)})
		e.release(i, t.RetryPolicy.MaxAttempts+1)
		return e.end()
	}
	final, evType := planbus.ToolFailed, planbus.EventToolFailed
	if r.State == planbus.ToolTimeout || errInfo.Category == planbus.CategoryTimeout {
		final, evType = planbus.ToolTimeout, planbus.EventToolTimeout
	}
	e.leave(i, final)
	e.toolEvent(evType, i, planbus.Event{Error: errInfo, DurationMs: r.DurationMs, WorkerID: r.WorkerID})
	e.failed(i, errInfo, fmt.Sprintf("required tool %q (skill %s) %s after %s: %s", t.ToolID, v.Skill,
		map[planbus.ToolState]string{planbus.ToolFailed: "failed", planbus.ToolTimeout: "timed out"}[final], plural(r.Attempt, "attempt"), errInfo.Message))
	return e.end()
}

// failed follows tool i's failure for good with errInfo: a required
// tool's transitive dependents are skipped and the plan fails with
// planMsg; an optional tool's dependents run with null in its place.
func (e *Engine) failed(i int, errInfo *planbus.ErrorInfo, planMsg string) {
	t := &e.plan.Tools[i]
	if t.Required {
		for _, d := range e.g.TransitiveDependents(i) {
			if e.st.Tools[d].State == planbus.ToolPending {
				e.leave(d, planbus.ToolSkipped)
				e.st.Tools[d].Reason = planbus.ReasonDependencyFailed
				e.toolEvent(planbus.EventToolSkipped, d, planbus.Event{Message: fmt.Sprintf("dependency %q failed", t.ToolID)})
			}
		}
		e.finish(planbus.PlanFailed, &planbus.ErrorInfo{Code: errInfo.Code, Category: errInfo.Category, Message: planMsg}, planbus.ReasonPlanFailed)
		return
	}
	e.tracker.Satisfy(i)
	e.fill()
	e.checkDone()
}

// OnTimer applies a due timer. A timer that no longer matches the state
// (the plan ended, or the retry already happened) changes nothing.
func (e *Engine) OnTimer(t Timer, now time.Time) Effects {
	e.begin(now)
	if e.Done() {
		return e.end()
	}
	switch t.Kind {
	case TimerRetry:
		if t.Index < 0 || t.Index >= len(e.st.Tools) {
			return e.end()
		}
		ts := &e.st.Tools[t.Index]
		if ts.State == planbus.ToolRetrying && ts.Attempt+1 == t.Attempt {
			e.release(t.Index, t.Attempt)
		}
	case TimerPlanTimeout:
		end := e.lifeEnd()
		if e.st.WaitingSince != 0 && (end == 0 || now.UnixMilli() < end) {
			// The clock stands while a tool waits for approval: a new
			// timeout is set when it runs again.
			return e.end()
		}
		if e.st.WaitingSince != 0 {
			e.finish(planbus.PlanTimeout, &planbus.ErrorInfo{Code: planbus.CodePlanTimeout, Category: planbus.CategoryTimeout,
				Message: fmt.Sprintf("plan waited for approval until its state would expire (%s after it started)", e.maxLife)}, planbus.ReasonPlanTimeout)
			return e.end()
		}
		if now.UnixMilli() < e.st.Deadline {
			return e.end()
		}
		e.finish(planbus.PlanTimeout, &planbus.ErrorInfo{Code: planbus.CodePlanTimeout, Category: planbus.CategoryTimeout,
			Message: fmt.Sprintf("plan exceeded %dms timeout", e.plan.TimeoutMs)}, planbus.ReasonPlanTimeout)
	case TimerCancel:
		e.cancel(t.Reason)
	case TimerApprove, TimerReject:
		if t.Index < 0 || t.Index >= len(e.st.Tools) || e.st.Tools[t.Index].State != planbus.ToolWaitingApproval {
			return e.end()
		}
		if t.Kind == TimerApprove {
			e.approve(t.Index, t.Reason)
		} else {
			e.reject(t.Index, t.Reason)
		}
	}
	return e.end()
}

// approve releases waiting tool i as soon as a slot is free.
func (e *Engine) approve(i int, reason string) {
	e.st.touch(i)
	ts := &e.st.Tools[i]
	ts.State, ts.Approved = planbus.ToolPending, true
	e.fx.Changed = true
	e.approved = append(e.approved, i)
	e.toolEvent(planbus.EventToolApproved, i, planbus.Event{Message: text.Clip(strings.TrimSpace(reason), MaxCancelReason)})
	e.clockRuns()
	e.fill()
}

// reject fails waiting tool i, which never ran, with code REJECTED
// (category permanent): no retry, no fallback, since a person said no to
// the step itself; its failure semantics apply as to any failure. A plan
// that fails this way is not replanned (see Result).
func (e *Engine) reject(i int, reason string) {
	e.st.touch(i)
	t, ts := &e.plan.Tools[i], &e.st.Tools[i]
	msg := "rejected by a person"
	if reason = strings.TrimSpace(reason); reason != "" {
		msg += ": " + text.Clip(reason, MaxCancelReason)
	}
	errInfo := &planbus.ErrorInfo{Code: planbus.CodeRejected, Category: planbus.CategoryPermanent, Message: msg}
	ts.Error = errInfo
	e.leave(i, planbus.ToolFailed)
	e.toolEvent(planbus.EventToolRejected, i, planbus.Event{Error: errInfo, Message: text.Clip(reason, MaxCancelReason)})
	e.failed(i, errInfo, fmt.Sprintf("required tool %q (skill %s) was %s", t.ToolID, t.Skill, msg))
	e.clockRuns()
}

// MaxCancelReason bounds the reason a cancel carries into the plan's
// error; a longer one is cut.
const MaxCancelReason = 1024

// Cancel stops the plan at now, as asked for by a user: the plan ends at
// once in state cancelled, with code CANCELLED (category cancelled, so
// nothing replans it); tools in flight (running or waiting to retry)
// are cancelled and the workers told to stop them (Effects.Cancel); tools
// not yet released are skipped. Both get reason cancelled. A plan that
// has ended stays as it is: its effects are empty. Results of the
// cancelled calls that arrive later change nothing.
func (e *Engine) Cancel(reason string, now time.Time) Effects {
	e.begin(now)
	if !e.Done() {
		e.cancel(reason)
	}
	return e.end()
}

func (e *Engine) cancel(reason string) {
	msg := "cancelled on request"
	if reason = strings.TrimSpace(reason); reason != "" {
		msg += ": " + text.Clip(reason, MaxCancelReason)
	}
	e.finish(planbus.PlanCancelled, &planbus.ErrorInfo{Code: planbus.CodeCancelled, Category: planbus.CategoryCancelled, Message: msg},
		planbus.ReasonCancelled)
}

// finish ends the plan: tools not yet released are skipped, tools in flight
// are cancelled, and the execution result is produced.
func (e *Engine) finish(status planbus.PlanState, errInfo *planbus.ErrorInfo, reason planbus.Reason) {
	for i := range e.st.Tools {
		ts := &e.st.Tools[i]
		switch {
		case ts.State == planbus.ToolPending || ts.State == planbus.ToolWaitingApproval:
			e.leave(i, planbus.ToolSkipped)
			ts.Reason = reason
			e.toolEvent(planbus.EventToolSkipped, i, planbus.Event{Message: string(reason)})
		case inFlight(ts.State):
			e.leave(i, planbus.ToolCancelled)
			ts.Reason = reason
			if reason == planbus.ReasonPlanTimeout || reason == planbus.ReasonCancelled {
				// The tool has no result of its own to say why it ended.
				ts.Error = errInfo
			}
			e.fx.Cancel = true
			e.toolEvent(planbus.EventToolCancelled, i, planbus.Event{Message: string(reason)})
		}
	}
	e.st.Status, e.st.Error, e.st.FinishedAt = status, errInfo, e.ms()
	// An ended plan's chunks are all written again, so they are kept as
	// long as its head (see chunks.go).
	e.st.touchAll()
	e.fx.Changed = true
	evType := map[planbus.PlanState]planbus.EventType{planbus.PlanSucceeded: planbus.EventPlanSucceeded, planbus.PlanFailed: planbus.EventPlanFailed,
		planbus.PlanTimeout: planbus.EventPlanTimeout, planbus.PlanCancelled: planbus.EventPlanCancelled}[status]
	ev := planbus.Event{Type: evType, Error: errInfo, DurationMs: float64(e.st.FinishedAt - e.st.StartedAt)}
	e.event(ev)
	e.fx.Done = e.Result()
}

func (e *Engine) checkDone() {
	if !e.Done() && e.finished == len(e.st.Tools) {
		e.finish(planbus.PlanSucceeded, nil, "")
	}
}

// Outstanding returns the effects the current state implies: a release for
// every running attempt, a timer for every retry and for the plan timeout,
// and the result of an ended plan. A dispatcher that handles a message for
// the second time carries them out again, so effects lost in a crash after
// the state was written are not lost for good; message ids make the
// repeats harmless.
func (e *Engine) Outstanding() Effects {
	var fx Effects
	if e.Done() {
		fx.Done = e.Result()
		return fx
	}
	switch {
	case e.st.WaitingSince == 0:
		fx.Timers = append(fx.Timers, Timer{Kind: TimerPlanTimeout, FireAt: time.UnixMilli(e.st.Deadline)})
	case e.lifeEnd() != 0:
		fx.Timers = append(fx.Timers, Timer{Kind: TimerPlanTimeout, FireAt: time.UnixMilli(e.lifeEnd())})
	}
	for i, ts := range e.st.Tools {
		switch ts.State {
		case planbus.ToolRunning:
			fx.Releases = append(fx.Releases, e.releaseOf(i, ts.Attempt))
		case planbus.ToolRetrying:
			fx.Timers = append(fx.Timers, Timer{Kind: TimerRetry, Index: i, Attempt: ts.Attempt + 1, FireAt: time.UnixMilli(ts.RetryAt)})
		}
	}
	return fx
}

// Result builds the execution result of the current state.
func (e *Engine) Result() *planbus.ExecutionResult {
	st := e.st
	res := &planbus.ExecutionResult{
		PlanID: st.PlanID, RequestID: st.RequestID, State: st.Status,
		Success: st.Status == planbus.PlanSucceeded, Error: st.Error,
		Tools:    make([]planbus.ToolOutcome, len(st.Tools)),
		Metadata: e.plan.Metadata,
	}
	// A plan a person rejected is not replanned: the next plan would ask
	// them again.
	res.CanReplan = (st.Status == planbus.PlanFailed || st.Status == planbus.PlanTimeout) &&
		(st.Error == nil || st.Error.Code != planbus.CodeRejected)
	if st.StartedAt > 0 {
		res.StartedAt = time.UnixMilli(st.StartedAt).UTC()
	}
	if st.FinishedAt > 0 {
		res.FinishedAt = time.UnixMilli(st.FinishedAt).UTC()
		res.DurationMs = float64(st.FinishedAt - st.StartedAt)
	}
	seenSkill := map[string]bool{}
	for i, ts := range st.Tools {
		t := e.plan.Tools[i]
		o := planbus.ToolOutcome{ToolID: t.ToolID, Skill: e.skillOf(i, ts.Attempt), State: ts.State, Required: t.Required,
			Attempts: ts.Attempt, Output: ts.Output, Error: ts.Error, Reason: ts.Reason, WorkerID: ts.WorkerID, DurationMs: ts.DurationMs,
			ResultSeq: ts.ResultSeq, Reused: ts.Reused}
		if ts.StartedAt > 0 {
			o.StartedAt = time.UnixMilli(ts.StartedAt).UTC()
		}
		if ts.FinishedAt > 0 {
			o.FinishedAt = time.UnixMilli(ts.FinishedAt).UTC()
		}
		res.Tools[i] = o
		if ts.State == planbus.ToolFailed || ts.State == planbus.ToolTimeout {
			res.FailedTools = append(res.FailedTools, t.ToolID)
			if !seenSkill[o.Skill] {
				seenSkill[o.Skill] = true
				res.FailedSkills = append(res.FailedSkills, o.Skill)
			}
		}
	}
	return res
}

// RetryDelay is the wait before the attempt after failed attempt n
// (1-based): backoffMs × 2^(n−1), without jitter.
func RetryDelay(p plan.RetryPolicy, n int) time.Duration {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     time.Duration(p.BackoffMs) * time.Millisecond,
		RandomizationFactor: 0,
		Multiplier:          2,
		MaxInterval:         100 * 24 * time.Hour,
		MaxElapsedTime:      0,
		Stop:                backoff.Stop,
		Clock:               backoff.SystemClock,
	}
	b.Reset()
	var d time.Duration
	for range n {
		d = b.NextBackOff()
	}
	return d
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// Verdict tells how a result or timer relates to the state.
type Verdict int

const (
	// Applies: the state expects it.
	Applies Verdict = iota
	// Past: it was handled already, or no longer matters.
	Past
	// Ahead: it follows from a change this state has not seen (a release, a
	// failure): the state is stale, and a fresher one will expect it.
	Ahead
)

// ResultVerdict classifies a result against the state.
func (e *Engine) ResultVerdict(r *planbus.ToolResult) Verdict {
	i, ok := e.g.Index(r.ToolID)
	if !ok {
		return Past
	}
	ts := e.st.Tools[i]
	switch {
	case ts.State == planbus.ToolRunning && ts.Attempt == r.Attempt && !e.Done():
		return Applies
	case e.Done():
		return Past
	case r.Attempt > ts.Attempt:
		return Ahead // the attempt's release is not in this state yet
	}
	return Past
}

// TimerVerdict classifies a timer against the state.
func (e *Engine) TimerVerdict(t Timer) Verdict {
	if e.Done() {
		return Past
	}
	if t.Kind == TimerApprove || t.Kind == TimerReject {
		if t.Index < 0 || t.Index >= len(e.st.Tools) {
			return Past
		}
		ts := e.st.Tools[t.Index]
		switch {
		case ts.State == planbus.ToolWaitingApproval:
			return Applies
		case ts.State == planbus.ToolPending && !ts.Approved:
			// The planner saw the tool wait: this state has not.
			return Ahead
		}
		return Past
	}
	if t.Kind != TimerRetry {
		return Applies
	}
	if t.Index < 0 || t.Index >= len(e.st.Tools) {
		return Past
	}
	ts := e.st.Tools[t.Index]
	switch {
	case t.Attempt <= ts.Attempt:
		return Past
	case ts.State == planbus.ToolRetrying && ts.Attempt+1 == t.Attempt:
		return Applies
	}
	return Ahead // the failure that set this retry is not in this state yet
}

// clockRuns starts the plan's clock again once no tool waits for
// approval: the deadline moves on by the time it stood, and a timeout is
// set for it (the one set before, if it fires, finds the plan not due).
func (e *Engine) clockRuns() {
	if e.st.WaitingSince == 0 || e.Done() {
		return
	}
	for i := range e.st.Tools {
		if e.st.Tools[i].State == planbus.ToolWaitingApproval {
			return
		}
	}
	now := e.ms()
	e.st.Deadline += max(now-e.st.WaitingSince, 0)
	if end := e.lifeEnd(); end != 0 {
		e.st.Deadline = min(e.st.Deadline, end)
	}
	e.st.WaitingSince = 0
	e.fx.Changed = true
	e.fx.Timers = append(e.fx.Timers, Timer{Kind: TimerPlanTimeout, FireAt: time.UnixMilli(e.st.Deadline)})
}
