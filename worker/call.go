package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/telemetry"
	"github.com/planbus/planbus/internal/token"
	"github.com/planbus/planbus/internal/wire"
	"github.com/planbus/planbus/skill"
)

// settledWait bounds a worker's question whether a call delivered again
// already ended; settledWindow is how long after its connection came back
// a worker asks about every call.
const (
	settledWait   = 15 * time.Second
	settledWindow = time.Minute
)

// errNoSettledAnswer is alreadySettled's error when no dispatcher could
// tell.
var errNoSettledAnswer = errors.New("no dispatcher could tell")

// resultHeadroom is what a result needs besides its output: ids, times,
// token, error, and the message's headers.
const resultHeadroom = 64 << 10

// callLog adds a call's plan, tool and attempt to the log lines of its
// handling, which are few (errors, and debug lines when enabled): building
// a logger with them for every call cost an allocation a call.
type callLog struct {
	log *slog.Logger
	tc  *planbus.ToolCall
	// seq and stored, when set, are the call message's stream sequence
	// and the time it was stored: they tell two messages of one call apart.
	seq    uint64
	stored time.Time
}

// at logs msg at level with the call's fields and then attrs; it builds
// nothing when the level is disabled.
func (c callLog) at(level slog.Level, msg string, attrs ...slog.Attr) {
	ctx := context.Background()
	if !c.log.Enabled(ctx, level) {
		return
	}
	all := make([]slog.Attr, 0, 5+len(attrs))
	all = append(all, slog.String("plan_id", c.tc.PlanID), slog.String("tool_id", c.tc.ToolID), slog.Int("attempt", c.tc.Attempt))
	if c.seq > 0 {
		all = append(all, slog.Uint64("stream_seq", c.seq), slog.String("stored", c.stored.UTC().Format("2006-01-02T15:04:05.000Z07:00")))
	}
	c.log.LogAttrs(ctx, level, msg, append(all, attrs...)...)
}

func (c callLog) Error(msg string, attrs ...slog.Attr) { c.at(slog.LevelError, msg, attrs...) }

func (c callLog) Warn(msg string, attrs ...slog.Attr) { c.at(slog.LevelWarn, msg, attrs...) }

func (c callLog) Info(msg string, attrs ...slog.Attr) { c.at(slog.LevelInfo, msg, attrs...) }

func (c callLog) Debug(msg string, attrs ...slog.Attr) { c.at(slog.LevelDebug, msg, attrs...) }

func (w *Worker) handle(s *served, msg jetstream.Msg) {
	name := s.skill.Manifest.Name
	log := s.log
	defer func() {
		// Skills run under Recover; this catches bugs of the worker itself.
		if r := recover(); r != nil {
			log.Error("worker bug; the call will be redelivered", slog.String("panic", fmt.Sprint(r)), slog.String("stack", string(debug.Stack())))
			_ = msg.NakWithDelay(5 * time.Second)
		}
	}()
	tc, err := wire.DecodeCall(msg.Data())
	if err != nil {
		w.refuseCall(s, msg, err)
		return
	}
	if tc.Skill != name {
		log.Error("dropping a tool call for another skill", slog.String("call_skill", tc.Skill))
		_ = msg.TermWithReason("tool call for skill " + tc.Skill + " on the queue of " + name)
		return
	}
	clog := callLog{log: log, tc: &tc}
	meta, merr := msg.Metadata()
	settled := false // acknowledged: done with, here or by another worker's result
	if merr == nil {
		clog.seq, clog.stored = meta.Sequence.Stream, meta.Timestamp
		// A call delivered again while this worker still runs or reports
		// it (its heartbeat came late, or it was published again as a new
		// message) runs once: the run settles every delivery.
		k := keyOf(&tc)
		switch w.hold(k, msg) {
		case holdRunning:
			clog.Debug("delivered again while it runs here; not running it twice, settled with the run", slog.Uint64("deliveries", meta.NumDelivered))
			_ = msg.InProgress()
			return
		case holdSettled:
			clog.Debug("delivered again just after it was settled here; acknowledging it again", slog.Uint64("deliveries", meta.NumDelivered))
			_ = msg.Ack()
			return
		}
		defer func() { w.unhold(k, settled) }()
	}
	s.stats.Received.Add(1)

	ctx, cancel := context.WithCancelCause(w.callCtx)
	defer cancel(nil)
	c := &call{msg: msg, planID: tc.PlanID, digest: tc.CancelDigest, cancel: cancel}
	if !w.track(c) {
		clog.Debug("plan ended; dropping its call")
		settled = msg.Ack() == nil
		return
	}
	// Tracked calls get heartbeats, while the worker asks whether the
	// call already ran (a question that outlasted the ack wait let the
	// call go to another worker, which asked too, and both ran it), while
	// it runs, and until its result is published: a result stream slow to
	// answer must not let the call run again.
	defer w.untrack(c)

	if merr == nil && (meta.NumDelivered > 1 || w.mayHaveRunBefore(meta.Timestamp)) {
		// Delivered again: it may have run before a crash, its result
		// stored and its acknowledgement lost. A server that crashed may
		// also have lost the record of the delivery, and deliver it again
		// as a first (soak: 19 completed calls re-run in 26 soaks of
		// server kills, each delivered anew with a delivery count of 1):
		// for a while after the connection came back, every call is asked
		// about, and so is a call stored before this worker began.
		ok, why, err := w.alreadySettled(ctx, &tc)
		switch {
		case ok:
			clog.Info("delivered again after its attempt ended; not running it again", slog.Uint64("deliveries", meta.NumDelivered), slog.String("why", why))
			settled = msg.Ack() == nil
			return
		case err != nil && ctx.Err() != nil:
			// Stopped or cancelled while asking: the run below ends at
			// once, as such a run does.
		case err != nil:
			clog.Warn("cannot learn whether the call already ran; running it (at least once)", slog.Any("error", err), slog.Uint64("deliveries", meta.NumDelivered))
		default:
			clog.Debug("delivered again, not run to its end before; running it", slog.Uint64("deliveries", meta.NumDelivered), slog.String("why", why))
		}
	}
	if merr == nil && int(meta.NumDelivered) > w.cfg.MaxDeliver {
		clog.Error("call delivered too often without a result; reporting it failed", slog.Uint64("deliveries", meta.NumDelivered))
		res := w.newResult(&tc, time.Now())
		res.State = planbus.ToolFailed
		res.Error = &planbus.ErrorInfo{Code: planbus.CodeWorkerCrash, Category: planbus.CategoryInternal,
			Message: fmt.Sprintf("delivered %d times without a result: the workers it went to died, hung or were stopped while running it", meta.NumDelivered-1)}
		settled = w.finish(clog, s, msg, res, nil)
		return
	}

	// The call's trace context, when it has one, is the parent of the
	// run's span and travels to the skill in ctx.
	ctx = telemetry.Extract(ctx, msg.Headers())
	span := trace.SpanFromContext(ctx)
	if w.traced {
		ctx, span = w.tracer.Start(ctx, telemetry.SpanToolRun, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
			telemetry.AttrPlanID.String(tc.PlanID), telemetry.AttrRequestID.String(tc.RequestID), telemetry.AttrToolID.String(tc.ToolID),
			telemetry.AttrSkill.String(name), telemetry.AttrAttempt.Int(tc.Attempt), telemetry.AttrWorkerID.String(w.cfg.ID)))
		defer span.End()
	}
	s.stats.Running.Add(1)
	started := time.Now()
	w.event(planbus.Event{Type: planbus.EventToolStarted, Time: started, RequestID: tc.RequestID, PlanID: tc.PlanID,
		ToolID: tc.ToolID, Skill: name, Attempt: tc.Attempt, WorkerID: w.cfg.ID})
	// Skills see neither token (a skill.Call has none): they are the
	// worker's to echo, not theirs to pass on.
	out, herr := s.handler.Handle(ctx, skillCall(&tc))
	s.stats.Running.Add(-1)

	if herr != nil {
		switch context.Cause(ctx) {
		case ErrShuttingDown:
			span.SetAttributes(telemetry.AttrState.String("handed back"))
			clog.Info("handing an unfinished call back")
			_ = msg.Nak()
			return
		case ErrPlanEnded:
			clog.Debug("plan ended; dropping its call")
			settled = msg.Ack() == nil
			return
		}
	}
	res := w.result(&tc, out, herr, started)
	if w.traced {
		span.SetAttributes(telemetry.AttrState.String(string(res.State)))
		if res.Error != nil {
			span.SetAttributes(telemetry.AttrErrorCode.String(string(res.Error.Code)))
			span.SetStatus(codes.Error, res.Error.Message)
		}
	}
	settled = w.finish(clog, s, msg, res, telemetry.Inject(ctx, nil))
}

// result turns what a handler returned into the call's result, holding
// outputs to the cap and to JSON.
func (w *Worker) result(tc *planbus.ToolCall, out skill.Result, herr error, started time.Time) *planbus.ToolResult {
	res := w.newResult(tc, started)
	switch {
	case herr != nil:
		info, output := skill.ErrorInfo(herr)
		res.Error, res.Output = info, output
		res.State = planbus.ToolFailed
		if info.Category == planbus.CategoryTimeout {
			res.State = planbus.ToolTimeout
		}
	case len(out.Output) > w.cfg.OutputCap:
		res.State = planbus.ToolFailed
		res.Error = &planbus.ErrorInfo{Code: planbus.CodeOutputTooLarge, Category: planbus.CategoryPermanent,
			Message: fmt.Sprintf("output of %d bytes exceeds the worker's cap of %d", len(out.Output), w.cfg.OutputCap)}
	case len(out.StatePatch) > w.cfg.OutputCap:
		res.State = planbus.ToolFailed
		res.Error = &planbus.ErrorInfo{Code: planbus.CodeOutputTooLarge, Category: planbus.CategoryPermanent,
			Message: fmt.Sprintf("state patch of %d bytes exceeds the worker's cap of %d", len(out.StatePatch), w.cfg.OutputCap)}
	default:
		if err := out.Check(); err != nil {
			res.State = planbus.ToolFailed
			res.Error, _ = skill.ErrorInfo(err)
			break
		}
		res.State = planbus.ToolSucceeded
		res.Output, res.StatePatch = out.Output, out.StatePatch
	}
	return res
}

// skillCall is what a handler is given of the call tc: its metadata and
// input, without its tokens.
func skillCall(tc *planbus.ToolCall) *skill.Call {
	return &skill.Call{PlanID: tc.PlanID, RequestID: tc.RequestID, ToolID: tc.ToolID, Skill: tc.Skill,
		Attempt: tc.Attempt, MaxAttempts: tc.MaxAttempts, Input: tc.Input,
		Timeout: time.Duration(tc.TimeoutMs) * time.Millisecond, ReleasedAt: tc.ReleasedAt}
}

// mayHaveRunBefore reports whether a call delivered for the first time
// may still have been delivered before, to be asked about: a server that
// crashed can lose the record of deliveries and deliver calls again as
// first deliveries. So within settledWindow after the worker's connection
// came back from a lost server, every call is asked about; and within
// settledWindow of the worker's start, every call stored before it began
// (a worker started after the crash, as the soak restarts killed workers,
// gets the forgotten deliveries too, though its connection never came
// back from anything: soak, 4 completed calls run again by a worker
// started 3 s after their first run). Calls newer than the worker, the
// usual case, are not asked about. It reads the connection's reconnect
// count, so it needs no handler of the connection, which is the caller's.
func (w *Worker) mayHaveRunBefore(stored time.Time) bool {
	now := time.Now()
	n := w.nc.Stats().Reconnects
	w.mu.Lock()
	defer w.mu.Unlock()
	if n != w.reconnects {
		w.reconnects, w.reconnectedAt = n, now
	}
	return !w.reconnectedAt.IsZero() && now.Sub(w.reconnectedAt) < settledWindow ||
		stored.Before(w.startedAt) && now.Sub(w.startedAt) < settledWindow
}

// alreadySettled asks the dispatchers whether the call's attempt already
// ended (see planbus.SettledQuery), and why. A dispatcher that cannot tell
// for the moment (it answers with an error: the server it reads from is
// just back from a crash, a stream leader moves) or no answer at all is
// asked again, with backoff, for up to settledWait; then, with still no
// answer, it returns an error and the call runs: at least once. "No
// responders" is asked again too: just after a server came back, the
// dispatchers may not have reconnected yet, and the call was published by
// one.
func (w *Worker) alreadySettled(ctx context.Context, tc *planbus.ToolCall) (bool, string, error) {
	q, _ := json.Marshal(planbus.SettledQuery{PlanID: tc.PlanID, ToolID: tc.ToolID, Attempt: tc.Attempt, Token: tc.Token})
	ctx, cancel := context.WithTimeout(ctx, settledWait)
	defer cancel()
	var r planbus.SettledReply
	ask := func() error {
		reqCtx, reqCancel := context.WithTimeout(ctx, 5*time.Second)
		defer reqCancel()
		m, err := w.nc.RequestWithContext(reqCtx, bus.SubjectCallSettled, q)
		switch {
		case err != nil:
			return err
		case m.Header.Get("Nats-Service-Error-Code") != "":
			return fmt.Errorf("a dispatcher answered %s %s", m.Header.Get("Nats-Service-Error-Code"), m.Header.Get("Nats-Service-Error"))
		}
		if err := json.Unmarshal(m.Data, &r); err != nil {
			return backoff.Permanent(fmt.Errorf("the answer does not decode: %w", err))
		}
		return nil
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 100*time.Millisecond, 2*time.Second, 0 // ctx ends it
	last := error(nil)                                                                          // the last answer's error: Retry returns ctx's when time is up
	if err := backoff.RetryNotify(ask, backoff.WithContext(b, ctx), func(err error, _ time.Duration) { last = err }); err != nil {
		if last == nil {
			last = err
		}
		return false, "", fmt.Errorf("%w within %s: %v", errNoSettledAnswer, settledWait, last)
	}
	return r.Settled, r.Why, nil
}

// refuseCall answers a call that does not decode, err says why: one that
// names its plan, tool, attempt and token, as a call of this skill, gets a
// failed result (INVALID_CALL, invalid_input) at once, so that its plan
// moves on rather than wait for its timeout; anything else is dropped.
func (w *Worker) refuseCall(s *served, msg jetstream.Msg, err error) {
	log := s.log
	var tc planbus.ToolCall
	if wire.Lenient(msg.Data(), &tc) != nil || tc.Skill != s.skill.Manifest.Name || !wire.IsID(tc.PlanID) ||
		!wire.IsID(tc.RequestID) || !wire.IsToolID(tc.ToolID) || tc.Attempt < 1 || !wire.IsToken(tc.Token) {
		log.Error("dropping an invalid tool call", slog.Any("error", err), slog.String("subject", msg.Subject()))
		_ = msg.TermWithReason("invalid tool call: " + err.Error())
		return
	}
	clog := callLog{log: log, tc: &tc}
	clog.Warn("cannot decode the call; reporting it failed", slog.Any("error", err))
	s.stats.Received.Add(1)
	res := w.newResult(&tc, time.Now())
	res.State = planbus.ToolFailed
	res.Error = &planbus.ErrorInfo{Code: planbus.CodeInvalidCall, Category: planbus.CategoryInvalidInput,
		Message: "the worker cannot decode this call: " + err.Error()}
	w.finish(clog, s, msg, res, nil)
}

func (w *Worker) newResult(tc *planbus.ToolCall, started time.Time) *planbus.ToolResult {
	now := time.Now()
	return &planbus.ToolResult{
		PlanID: tc.PlanID, RequestID: tc.RequestID, ToolID: tc.ToolID, Skill: tc.Skill, Attempt: tc.Attempt,
		WorkerID: w.cfg.ID, StartedAt: started, FinishedAt: now,
		DurationMs: float64(now.Sub(started).Microseconds()) / 1000, Token: tc.Token,
	}
}

// finish publishes the result, waits for JetStream to store it, and only
// then acknowledges the call. It reports whether the call is settled: its
// result stored (false: handed back for another delivery).
//
// h, when not nil, is the trace context the result carries: the run's span.
func (w *Worker) finish(log callLog, s *served, msg jetstream.Msg, res *planbus.ToolResult, h nats.Header) (settled bool) {
	if res.State == planbus.ToolSucceeded {
		s.stats.Succeeded.Add(1)
	} else {
		s.stats.Failed.Add(1)
	}
	data, err := wire.AppendResult(make([]byte, 0, 384+len(res.Output)+len(res.StatePatch)), res)
	if err != nil {
		// A bug of the worker (result checks what a skill returns):
		// report the attempt failed rather than run it again and again.
		log.Error("cannot encode result; reporting the attempt failed", slog.Any("error", err))
		failed := *res
		failed.State, failed.Output, failed.StatePatch = planbus.ToolFailed, nil, nil
		failed.Error = &planbus.ErrorInfo{Code: planbus.CodeToolFailed, Category: planbus.CategoryInternal,
			Message: "the worker could not encode the skill's result: " + err.Error()}
		if data, err = wire.AppendResult(nil, &failed); err != nil {
			_ = msg.NakWithDelay(5 * time.Second)
			return false
		}
	}
	key := token.MsgID(planbus.IdempotencyKey(res.PlanID, res.ToolID, res.Attempt), res.Token)
	err = w.publishResult(res.PlanID, data, key, h)
	if errors.Is(err, nats.ErrMaxPayload) {
		// Output and state patch within the cap, and yet more than the
		// server takes: the same result would never fit.
		size := len(data)
		tooLarge := *res
		tooLarge.State, tooLarge.Output, tooLarge.StatePatch = planbus.ToolFailed, nil, nil
		tooLarge.Error = &planbus.ErrorInfo{Code: planbus.CodeOutputTooLarge, Category: planbus.CategoryPermanent,
			Message: fmt.Sprintf("the result takes %d bytes, over the server's max payload of %d", size, w.nc.MaxPayload())}
		if data, err = wire.AppendResult(nil, &tooLarge); err == nil {
			err = w.publishResult(res.PlanID, data, key, h)
		}
	}
	if err != nil {
		log.Error("cannot publish result; the call will be redelivered", slog.Any("error", err))
		_ = msg.Nak()
		return false
	}
	// The result is stored: the call is done with, whatever becomes of
	// the ack.
	if err := msg.Ack(); err != nil {
		log.Warn("ack failed; the call may run again (its result is de-duplicated)", slog.Any("error", err))
	}
	if res.Error != nil {
		// Failures are what an operator looks for in a worker's log.
		log.Info("call failed", slog.String("state", string(res.State)), slog.String("code", string(res.Error.Code)),
			slog.String("category", string(res.Error.Category)), slog.String("error", res.Error.Message))
		return true
	}
	log.Debug("call finished", slog.String("state", string(res.State)))
	return true
}

// publishResult publishes a result to the results stream (through the
// worker's resultPublisher: in a batch with others that finish at the same
// time, or on its own), retrying with backoff for up to 30 s while the
// stream does not answer, each try bounded by publishTry; a result too
// large for the server is not retried (nats.ErrMaxPayload).
func (w *Worker) publishResult(planID string, data []byte, key string, h nats.Header) error {
	if h == nil {
		h = nats.Header{}
	}
	h.Set(jetstream.MsgIDHeader, key)
	m := &nats.Msg{Subject: bus.ResultSubject(planID), Data: data, Header: h}
	publish := func() error {
		ctx, cancel := context.WithTimeout(w.callCtx, publishTry)
		defer cancel()
		err := w.results.publish(ctx, m)
		if errors.Is(err, nats.ErrMaxPayload) {
			return backoff.Permanent(err)
		}
		return err
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 50 * time.Millisecond
	b.MaxElapsedTime = 30 * time.Second
	return backoff.Retry(publish, backoff.WithContext(b, w.callCtx))
}

// event publishes a progress event. Events are best effort: they are for
// watching, and nothing depends on them.
func (w *Worker) event(ev planbus.Event) {
	data, err := wire.AppendEvent(make([]byte, 0, 320), &ev)
	if err != nil {
		return
	}
	_ = w.nc.Publish(bus.EventSubject(ev.RequestID, ev.Type), data)
}
