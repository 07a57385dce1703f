package htn

import (
	"fmt"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// The search trace (Options.Trace) is what the reference engine writes when
// its tracing is on (showTraces, indhtn's /t): every task the planner
// takes, every method it tries with the outcome of its condition, the
// operators it applies or cannot apply, the tasks that fail back to their
// parent, and the plans found. It is kept in memory, bounded by
// Options.TraceLimit and charged to the memory budget.

// DefaultTraceLimit is how many trace events a call keeps when
// Options.TraceLimit is 0.
const DefaultTraceLimit = 10000

// maxTraceText bounds the text of a term in a trace event, in bytes.
const maxTraceText = 256

// TraceKind is what a TraceEvent records.
type TraceKind string

// The kinds of TraceEvent.
const (
	// TraceTask: a task is taken from the task list (Task).
	TraceTask TraceKind = "task"
	// TraceMethod: a method (Method, Line) is tried for the task; Answers
	// is the number of answers of its condition, each a branch. With none
	// the method fails, and Detail says at which goal of its if().
	TraceMethod TraceKind = "method"
	// TraceElse: an else method is skipped because a method before it led
	// to a plan.
	TraceElse TraceKind = "else skipped"
	// TraceOperator: the operator Task is applied (Detail "hidden" for a
	// hidden one).
	TraceOperator TraceKind = "operator"
	// TraceRefused: the task names an operator that does not apply;
	// Detail says why. The branch fails.
	TraceRefused TraceKind = "operator refused"
	// TraceNoMethod: no operator or method takes the task. The branch
	// fails.
	TraceNoMethod TraceKind = "no method"
	// TraceFail: every method of the task was tried and none led to a
	// plan: the search backtracks past the task.
	TraceFail TraceKind = "fail"
	// TraceTrySkipped: the tasks of a try() failed; the search carries on
	// without them.
	TraceTrySkipped TraceKind = "try skipped"
	// TraceAnyOfNone: no branch of an anyOf method succeeded; it fails.
	TraceAnyOfNone TraceKind = "anyOf failed"
	// TracePlan: the task list ran out: a plan (Detail "plan N").
	TracePlan TraceKind = "plan"
)

// TraceEvent is one step of the search.
type TraceEvent struct {
	// Depth is the node's depth in the search, 1 for the first goal.
	Depth int
	Kind  TraceKind
	// Task is the task (or operator) as printed. Terms in Task, Method
	// and Detail are cut to 256 bytes.
	Task string
	// Method and Line name the method tried (TraceMethod, TraceElse).
	Method string
	Line   int
	// Answers is the number of answers of the method's condition
	// (TraceMethod).
	Answers int
	Detail  string
}

// String prints the event on one line, e.g.
//
//	[1] method travel-to(?q) (line 5) for travel-to(park): 1 answer
func (ev TraceEvent) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%d] %s", ev.Depth, ev.Kind)
	switch ev.Kind {
	case TraceMethod, TraceElse:
		fmt.Fprintf(&b, " %s (line %d) for %s", ev.Method, ev.Line, ev.Task)
		if ev.Kind == TraceMethod {
			switch ev.Answers {
			case 0:
				b.WriteString(": no answer")
			case 1:
				b.WriteString(": 1 answer")
			default:
				fmt.Fprintf(&b, ": %d answers", ev.Answers)
			}
		}
	default:
		if ev.Task != "" {
			b.WriteString(" " + ev.Task)
		}
	}
	if ev.Detail != "" {
		if ev.Kind == TracePlan {
			b.WriteString(" " + ev.Detail)
		} else {
			b.WriteString(": " + ev.Detail)
		}
	}
	return b.String()
}

var sizeTraceEvent = int64(unsafe.Sizeof(TraceEvent{}))

// trace records an event when tracing is on and the limit is not reached;
// past the limit it only counts it. The event and its text count against
// the memory budget.
func (pl *planner) trace(kind TraceKind, task *term, m *method, answers int, detail string) {
	r := pl.r
	if !r.opts.Trace {
		return
	}
	limit := r.opts.TraceLimit
	if limit <= 0 {
		limit = DefaultTraceLimit
	}
	if len(r.trace) >= limit {
		r.traceDropped++
		return
	}
	ev := TraceEvent{Depth: len(pl.stack), Kind: kind, Answers: answers, Detail: detail}
	if task != nil {
		ev.Task = clipText(r.printer().String(*task), maxTraceText)
	}
	if m != nil {
		ev.Method, ev.Line = clipText(m.text, maxTraceText), m.line
	}
	before := sliceBytes(cap(r.trace), sizeTraceEvent)
	r.trace = append(r.trace, ev)
	r.traceMem += sliceBytes(cap(r.trace), sizeTraceEvent) - before + int64(len(ev.Task)+len(ev.Detail))
}

// clipText shortens s to at most n bytes, on a rune boundary, marking the
// cut with "…".
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
