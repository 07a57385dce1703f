package dispatcher

import (
	"context"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/execution"
	"github.com/planbus/planbus/internal/telemetry"
)

// A traced plan carries its span's trace context in its state
// (execution.State.Trace), set when the plan starts: the span itself is
// recorded when the plan ends, by whichever dispatcher ends it, with the
// span id fixed at the start. Each tool attempt's span id derives from the
// plan's span id, so the call's traceparent names it when the call is
// released, and the dispatcher that applies the attempt's end records it
// (start: the release, end: the result). Plans without trace context cost
// a nil check.

// parentSpanKey is where State.Trace keeps the id of the plan span's
// parent; the plan span is a root without it.
const parentSpanKey = "parent"

// traceStart returns the trace context of a plan's span, from the trace
// context its message carries (h), or nil when the plan is not traced:
// it carries none and this dispatcher's tracer does not record (or does
// not sample a new trace). The span is only started to take its ids and
// sampling decision; it is recorded when the plan ends (planSpan).
func (d *Dispatcher) traceStart(h nats.Header) map[string]string {
	parent := trace.SpanContextFromContext(telemetry.Extract(context.Background(), h))
	if !parent.IsValid() && !d.traced {
		return nil
	}
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), parent)
	sc := parent
	if d.traced {
		_, sp := d.tracer.Start(ctx, telemetry.SpanPlan)
		sc = sp.SpanContext()
	}
	if !sc.IsValid() {
		return nil
	}
	// A recording tracer's span is the parent's child, with its tracestate;
	// a no-op one hands the parent's context on as it is, so the calls
	// stay in the caller's trace.
	m := telemetry.Map(trace.ContextWithSpanContext(context.Background(), sc))
	if parent.IsValid() && parent.SpanID() != sc.SpanID() {
		m[parentSpanKey] = parent.SpanID().String()
	}
	return m
}

// planSpanContext is the span context of a traced plan's span.
func planSpanContext(st *execution.State) trace.SpanContext {
	return trace.SpanContextFromContext(telemetry.FromMap(context.Background(), st.Trace))
}

// callHeader is the trace context of a tool attempt's call: its span is
// the attempt's, a child of the plan's. Nil for a plan not traced.
func callHeader(st *execution.State, toolID string, attempt int) nats.Header {
	if st.Trace == nil {
		return nil
	}
	psc := planSpanContext(st)
	if !psc.IsValid() {
		return nil
	}
	sc := psc.WithSpanID(telemetry.ChildID(psc.SpanID(), toolID, strconv.Itoa(attempt)))
	return telemetry.Inject(trace.ContextWithSpanContext(context.Background(), sc), nil)
}

// runningAttempt is a tool attempt in flight before a batch is applied.
type runningAttempt struct {
	index, attempt int
	released       int64 // Unix ms
}

// inFlight lists the attempts of a traced plan in flight, so the spans of
// those the batch ends can be recorded; nil for a plan not traced.
func (d *Dispatcher) inFlight(eng *execution.Engine) []runningAttempt {
	st := eng.State()
	if st.Trace == nil || !d.traced {
		return nil
	}
	var out []runningAttempt
	for i, t := range st.Tools {
		if t.State == planbus.ToolRunning {
			out = append(out, runningAttempt{index: i, attempt: t.Attempt, released: t.ReleasedAt})
		}
	}
	return out
}

// traceEnded records the spans of the attempts in before that the batch
// ended (with the results applied, fx.Applied), and the plan's span if
// the batch ended the plan (ended). Called once the batch's state is
// stored, so a batch applied again after a lost compare-and-set records
// nothing twice; nor does a message that comes after the plan ended (a
// late cancel, a redelivery), which redoes what the state implies, the
// plan's end included: its span was recorded when it ended. (A dispatcher
// that died between storing the end and recording the span leaves it
// unrecorded.)
func (d *Dispatcher) traceEnded(eng *execution.Engine, before []runningAttempt, fx *execution.Effects, ended bool, now time.Time) {
	st := eng.State()
	if st.Trace == nil || !d.traced {
		return
	}
	psc := planSpanContext(st)
	if !psc.IsValid() {
		return
	}
	p := eng.Plan()
	for _, a := range before {
		ts := &st.Tools[a.index]
		if ts.State == planbus.ToolRunning && ts.Attempt == a.attempt {
			continue
		}
		t := &p.Tools[a.index]
		state, errInfo, worker := ts.State, ts.Error, ""
		if ts.Attempt != a.attempt || state == planbus.ToolRetrying {
			state = planbus.ToolFailed // retried, or its fallback took over
		}
		for _, ap := range fx.Applied {
			if ap.Index == a.index && ap.Result.Attempt == a.attempt {
				state, errInfo, worker = ap.Result.State, ap.Result.Error, ap.Result.WorkerID
			}
		}
		attrs := []attribute.KeyValue{telemetry.AttrPlanID.String(p.PlanID), telemetry.AttrRequestID.String(p.RequestID),
			telemetry.AttrToolID.String(t.ToolID), telemetry.AttrSkill.String(t.Variant(a.attempt).Skill),
			telemetry.AttrAttempt.Int(a.attempt), telemetry.AttrState.String(string(state))}
		if worker != "" {
			attrs = append(attrs, telemetry.AttrWorkerID.String(worker))
		}
		sid := telemetry.ChildID(psc.SpanID(), t.ToolID, strconv.Itoa(a.attempt))
		d.record(trace.ContextWithRemoteSpanContext(context.Background(), psc), psc.TraceID(), sid, telemetry.SpanTool,
			trace.SpanKindProducer, time.UnixMilli(a.released), now, attrs, state == planbus.ToolSucceeded, errInfo)
	}
	if ended && fx.Done != nil {
		d.planSpan(st, fx.Done)
	}
}

// planSpan records a traced plan's span, from its start to its end.
func (d *Dispatcher) planSpan(st *execution.State, res *planbus.ExecutionResult) {
	psc := planSpanContext(st)
	if !psc.IsValid() {
		return
	}
	ctx := context.Background()
	if id, err := trace.SpanIDFromHex(st.Trace[parentSpanKey]); err == nil {
		ctx = trace.ContextWithRemoteSpanContext(ctx, psc.WithSpanID(id))
	}
	attrs := []attribute.KeyValue{telemetry.AttrPlanID.String(st.PlanID), telemetry.AttrRequestID.String(st.RequestID),
		telemetry.AttrSessionID.String(st.SessionID), telemetry.AttrState.String(string(res.State)), telemetry.AttrTools.Int(len(st.Tools))}
	end := res.FinishedAt
	if end.IsZero() {
		end = time.Now()
	}
	d.record(ctx, psc.TraceID(), psc.SpanID(), telemetry.SpanPlan, trace.SpanKindConsumer,
		time.UnixMilli(st.StartedAt), end, attrs, res.Success, res.Error)
}

// record records a span with preset ids (see telemetry.WithIDs) between
// two times.
func (d *Dispatcher) record(parent context.Context, tid trace.TraceID, sid trace.SpanID, name string, kind trace.SpanKind,
	start, end time.Time, attrs []attribute.KeyValue, ok bool, errInfo *planbus.ErrorInfo) {
	_, sp := d.tracer.Start(telemetry.WithIDs(parent, tid, sid), name, trace.WithSpanKind(kind),
		trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	if !ok {
		msg := "failed"
		if errInfo != nil {
			sp.SetAttributes(telemetry.AttrErrorCode.String(string(errInfo.Code)))
			msg = errInfo.Message
		}
		sp.SetStatus(codes.Error, msg)
	}
	sp.End(trace.WithTimestamp(end))
}

// rejectSpan records the span of a plan rejected at its start.
func (d *Dispatcher) rejectSpan(h nats.Header, planID, requestID string, errInfo *planbus.ErrorInfo) {
	ctx := telemetry.Extract(context.Background(), h)
	if !d.traced && !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	_, sp := d.tracer.Start(ctx, telemetry.SpanPlan, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		telemetry.AttrPlanID.String(planID), telemetry.AttrRequestID.String(requestID),
		telemetry.AttrState.String(string(planbus.PlanRejected)), telemetry.AttrErrorCode.String(string(errInfo.Code))))
	sp.SetStatus(codes.Error, errInfo.Message)
	sp.End()
}
