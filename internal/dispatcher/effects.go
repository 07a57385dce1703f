package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/execution"
	"github.com/planbus/planbus/internal/health"
	"github.com/planbus/planbus/internal/telemetry"
	"github.com/planbus/planbus/internal/token"
	"github.com/planbus/planbus/internal/wire"
)

// learn records what applied results tell: each skill's health in the
// plan's session (with an event for every transition) and the session
// state patches the tools returned. Both are idempotent, so they are done
// before the plan state is stored and redone if that fails.
func (d *Dispatcher) learn(ctx context.Context, log zerolog.Logger, eng *execution.Engine, applied []execution.Applied) error {
	p, st := eng.Plan(), eng.State()
	sid := sessionOf(st)
	for _, a := range applied {
		r, t := a.Result, p.Tools[a.Index]
		skill := t.Variant(r.Attempt).Skill
		o := health.Outcome{Key: planbus.IdempotencyKey(p.PlanID, t.ToolID, r.Attempt),
			Succeeded: r.State == planbus.ToolSucceeded, Retry: r.Attempt > 1, Final: a.Final}
		if r.Error != nil {
			o.Category, o.Error = r.Error.Category, r.Error.Message
			if r.Error.Code == planbus.CodeVerifyFailed || r.Error.Category == planbus.CategoryInvalidInput {
				// The skill ran; its output did not pass the step's gate,
				// or the input it was given was at fault. That says
				// nothing about the skill's health: a caller sending bad
				// input must not disable the skill for the session.
				continue
			}
		}
		if d.health.Quick(sid, skill, o) {
			before, after, err := d.health.Apply(ctx, sid, skill, o)
			if err != nil {
				return err
			}
			if before.State != after.State {
				d.metrics.HealthChanged(skill, before.State, after.State)
				log.Info().Str("skill", skill).Str("session", sid).Str("from", before.State).Str("to", after.State).Msg("skill health changed")
				d.event(planbus.Event{Type: planbus.EventSkillHealth, Time: time.Now(), RequestID: st.RequestID, PlanID: p.PlanID,
					ToolID: t.ToolID, Skill: skill, SessionID: sid, From: before.State, To: after.State,
					Message: fmt.Sprintf("%s: %s -> %s", skill, before.State, after.State)})
			}
		}
		if len(r.StatePatch) > 0 && r.State == planbus.ToolSucceeded {
			if _, err := d.states.Patch(ctx, sid, r.StatePatch); err != nil {
				return fmt.Errorf("session %s: %w", sid, err)
			}
		}
	}
	return nil
}

// rendered holds the messages of a batch's effects, encoded before its
// state is stored.
type rendered struct {
	calls []renderedCall
	done  []byte
}

type renderedCall struct {
	subject, msgID, skill string
	data                  []byte
	header                nats.Header // the trace context of a traced plan's call, or nil
}

// render encodes the tool calls and the execution result the effects ask
// for. It runs before the state is stored because encoding can change the
// state: a call that would not fit in a message (its input grew too large
// with its dependencies' outputs) cannot be published, so its attempt
// fails at once with INPUT_TOO_LARGE, which is never retried. An execution
// result too large for a message goes out without outputs; every tool's
// result stays readable in the RESULTS stream at its resultSeq.
func (d *Dispatcher) render(ent *entry, fx *execution.Effects, now time.Time) rendered {
	eng := ent.eng
	p, st := eng.Plan(), eng.State()
	limit := d.storeLimit()
	var out rendered
	outputs := func(id string) (json.RawMessage, bool) {
		i, ok := eng.Index(id)
		if !ok || st.Tools[i].State != planbus.ToolSucceeded {
			return nil, false
		}
		return st.Tools[i].Output, true
	}
	// fx.Releases can grow while it is walked: failing one call may free a
	// slot for another.
	for k := 0; k < len(fx.Releases); k++ {
		r := fx.Releases[k]
		t := &p.Tools[r.Index]
		v := t.Variant(r.Attempt)
		input, err := p.ResolveInputFor(r.Index, r.Attempt, outputs)
		if err != nil {
			// Outputs are JSON by the time they are stored, so this is a bug;
			// run the tool with its references unresolved rather than stall.
			d.log.Error().Err(err).Str("plan_id", p.PlanID).Str("tool_id", t.ToolID).Msg("cannot resolve input references")
			input = v.Input
		}
		if ent.cancelDigest == "" {
			ent.cancelDigest = token.Digest(d.key.Cancel(p.PlanID))
		}
		call := planbus.ToolCall{PlanID: p.PlanID, RequestID: p.RequestID, ToolID: t.ToolID, Skill: v.Skill,
			Attempt: r.Attempt, MaxAttempts: t.Attempts(), Input: input, TimeoutMs: r.TimeoutMs,
			IdempotencyKey: planbus.IdempotencyKey(p.PlanID, t.ToolID, r.Attempt), ReleasedAt: time.UnixMilli(st.Tools[r.Index].ReleasedAt).UTC(),
			Token: d.key.Result(p.PlanID, t.ToolID, r.Attempt), CancelDigest: ent.cancelDigest}
		data, err := wire.AppendCall(make([]byte, 0, 384+len(input)), &call)
		if err != nil {
			panic(fmt.Sprintf("dispatcher: encode a call: %v", err)) // inputs are JSON by the time they are resolved
		}
		if len(data) > limit {
			fx.Merge(eng.OnResult(&planbus.ToolResult{ToolID: t.ToolID, Attempt: r.Attempt, State: planbus.ToolFailed,
				Error: &planbus.ErrorInfo{Code: planbus.CodeInputTooLarge, Category: planbus.CategoryPermanent,
					Message: fmt.Sprintf("the call's input with its references resolved takes %d bytes; a message holds at most %d", len(data), limit)}}, now))
			continue
		}
		out.calls = append(out.calls, renderedCall{subject: bus.ToolSubject(v.Skill), msgID: token.MsgID(call.IdempotencyKey, call.Token), skill: v.Skill, data: data,
			header: callHeader(st, t.ToolID, r.Attempt)})
	}
	if fx.Done != nil {
		out.done = mustJSON(fx.Done)
		if len(out.done) > limit {
			slim := *fx.Done
			slim.OutputsOmitted = true
			slim.Tools = append([]planbus.ToolOutcome(nil), fx.Done.Tools...)
			for i := range slim.Tools {
				slim.Tools[i].Output = nil
			}
			out.done = mustJSON(&slim)
			if len(out.done) > limit {
				// Tens of thousands of tools: keep those that did not
				// succeed, which are what a caller looks for, if they fit.
				slim.ToolsOmitted = true
				slim.Tools = slices.DeleteFunc(slim.Tools, func(o planbus.ToolOutcome) bool { return o.State == planbus.ToolSucceeded })
				if out.done = mustJSON(&slim); len(out.done) > limit {
					slim.Tools = []planbus.ToolOutcome{}
					out.done = mustJSON(&slim)
				}
			}
		}
	}
	return out
}

// A publish nats.go refuses as stalled (too many awaiting their
// acknowledgement) is tried again after the pending ones complete or
// stallWait, at most maxStalls times (about a minute) before the batch
// fails and is handed back.
const (
	stallWait = 100 * time.Millisecond
	maxStalls = 600
)

// send carries out effects whose state is already stored: events first
// (they are informational), then every JetStream publish at once, without
// waiting for them to be stored; settle does that.
func (d *Dispatcher) send(ent *entry, fx execution.Effects, out rendered) (pending, error) {
	p := ent.eng.Plan()
	pd := pending{planID: p.PlanID, ent: ent, timeoutTimer: -1, cancel: fx.Cancel, done: fx.Done != nil}
	if fx.Done != nil {
		pd.doneState = fx.Done.State
	}
	for _, ev := range fx.Events {
		d.event(ev)
	}
	pub := func(subject string, data []byte, msgID string, h nats.Header) error {
		var f jetstream.PubAckFuture
		var err error
		// nats.go holds at most a few thousand publishes awaiting their
		// acknowledgement (a fan-out's release, or many plans' at once,
		// are more) and refuses the next after a short wait: that is
		// backpressure, not a failure, and the publish is tried again
		// once some are acknowledged.
		for stalls := 0; ; stalls++ {
			if h == nil {
				f, err = d.conn.JS.PublishAsync(subject, data, jetstream.WithMsgID(msgID))
			} else {
				f, err = d.conn.JS.PublishMsgAsync(&nats.Msg{Subject: subject, Data: data, Header: h}, jetstream.WithMsgID(msgID))
			}
			if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) || stalls >= maxStalls {
				break
			}
			select {
			case <-d.conn.JS.PublishAsyncComplete():
			case <-time.After(stallWait):
			}
		}
		if err != nil {
			return fmt.Errorf("publish %s: %w", subject, err)
		}
		pd.futures = append(pd.futures, f)
		return nil
	}
	callBytes := 0
	for _, c := range out.calls {
		if err := pub(c.subject, c.data, c.msgID, c.header); err != nil {
			return pd, err
		}
		callBytes += len(c.data)
		d.stats.Released.Add(1)
		d.metrics.Released(c.skill)
	}
	if callBytes > 0 {
		d.keep(callBytes)
	}
	for _, tm := range fx.Timers {
		body := tm.Message(p.PlanID)
		if tm.Kind != execution.TimerPlanTimeout {
			if err := pub(bus.TimerSubject(p.PlanID), mustJSON(body), body.MsgID(), nil); err != nil {
				return pd, err
			}
			continue
		}
		m := timeoutSchedule(body)
		if d.behind.defers(tm.FireAt, time.Now()) {
			// Published with the acknowledgement, if the plan still runs.
			pd.timer = m
			continue
		}
		if err := pub(m.Subject, m.Data, body.MsgID(), m.Header); err != nil {
			return pd, err
		}
		pd.timeoutTimer = len(pd.futures) - 1
	}
	if out.done != nil {
		// A traced plan's execution result carries the plan span's context.
		if err := pub(bus.ExecutionSubject(p.PlanID), out.done, p.PlanID, telemetry.HeaderFromMap(ent.eng.State().Trace)); err != nil {
			return pd, err
		}
	}
	return pd, nil
}

// errCodeInProcess is JetStream's "duplicate message id is in process":
// on a replicated stream, a message with the same id was proposed a moment
// ago and is not stored yet. Until it is, it is neither stored nor lost.
const errCodeInProcess = 10158

// republishInProcess publishes m again, after a short pause, while its
// stream answers that a message with its id is in process (err): once that
// one is stored the answer is a duplicate's acknowledgement, and should it
// be lost the message is stored now. Other errors are returned as they are.
func (d *Dispatcher) republishInProcess(ctx context.Context, m *nats.Msg, err error) (*jetstream.PubAck, error) {
	for pause := 5 * time.Millisecond; ; pause = min(2*pause, 200*time.Millisecond) {
		var apiErr *jetstream.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode != errCodeInProcess {
			return nil, err
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return nil, err
		}
		var ack *jetstream.PubAck
		if ack, err = d.conn.JS.PublishMsg(ctx, m); err == nil {
			return ack, nil
		}
	}
}

// settle waits until JetStream has stored a batch's effects and then
// acknowledges its messages. If any publish failed, the messages are handed
// back instead: whoever handles them again republishes what the state
// implies.
func (d *Dispatcher) settle(pd pending) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for k, f := range pd.futures {
		select {
		case <-f.Ok():
			if k == pd.timeoutTimer {
				pd.ent.scheduled.Store(true)
			}
			continue
		case err := <-f.Err():
			if _, err = d.republishInProcess(ctx, f.Msg(), err); err == nil {
				if k == pd.timeoutTimer {
					pd.ent.scheduled.Store(true)
				}
				continue
			}
			m := f.Msg()
			d.log.Error().Err(err).Str("plan_id", pd.planID).Str("subject", m.Subject).Str("msg_id", m.Header.Get(jetstream.MsgIDHeader)).
				Msg("a publish failed; messages will be redelivered")
		case <-ctx.Done():
			d.log.Error().Str("plan_id", pd.planID).Msg("publishes not stored in time; messages will be redelivered")
		case <-d.closed:
			// The process is going: its messages are delivered again
			// to whoever takes them.
			return
		}
		d.handBack(d.log.With().Str("plan_id", pd.planID).Logger(), pd.ack, time.Second, errors.New("publishes not stored"))
		return
	}
	d.behind.ack(pd.ack, pd.timer, pd.ent)
	if pd.cancel {
		d.cancel(pd.planID)
	}
	if pd.done {
		d.stats.PlansEnded.Add(1)
		d.metrics.PlanEnded(pd.doneState)
		// The timeout of an ended plan would only be ignored when it
		// fires; its schedule is purged rather than kept (timeouts.go).
		// (After a failover it is not known here to be stored, and it
		// fires as a no-op.)
		if pd.ent.scheduled.Load() {
			d.unschedule(pd.planID)
		}
	}
}

// cancel tells workers to stop the plan's calls: the plan has ended (it
// failed, timed out or was cancelled) with calls in flight. The message
// reveals the plan's cancel token, whose digest every call of the plan
// carries, so workers can tell it from a forged one. Dispatchers alone make
// these; a planner asks for a plan's cancel through a durable TimerCancel
// message, which ends the plan in the engine and so comes here. Best
// effort, like events: a worker that misses it runs its call to the end,
// and the result is ignored.
func (d *Dispatcher) cancel(planID string) {
	_ = d.conn.NC.Publish(bus.CancelSubject(planID), mustJSON(planbus.Cancel{PlanID: planID, Token: d.key.Cancel(planID)}))
}

// event publishes a progress event on core NATS; the EVENTS stream keeps
// it. Events are best effort: nothing depends on them.
func (d *Dispatcher) event(ev planbus.Event) {
	data, err := wire.AppendEvent(make([]byte, 0, 320), &ev)
	if err != nil {
		panic(fmt.Sprintf("dispatcher: encode an event: %v", err)) // only our own values are encoded
	}
	_ = d.conn.NC.Publish(bus.EventSubject(ev.RequestID, ev.Type), data)
}

func sessionOf(st *execution.State) string {
	if st.SessionID == "" {
		return planbus.DefaultSession
	}
	return st.SessionID
}

// countAttempts counts the attempts whose results a stored state
// applied, by the skill each ran on.
func (d *Dispatcher) countAttempts(eng *execution.Engine, applied []execution.Applied) {
	if d.metrics == nil {
		return
	}
	p := eng.Plan()
	for _, a := range applied {
		r := a.Result
		d.metrics.Attempt(p.Tools[a.Index].Variant(r.Attempt).Skill, r.State, time.Duration(r.DurationMs*float64(time.Millisecond)))
	}
}

// timeoutFactor is the engines' execution.TimeoutFactor: a degraded
// skill's calls get health.DegradedTimeoutFactor times their timeout. It
// reads the health book, which the bucket's watch keeps current in memory.
func (d *Dispatcher) timeoutFactor(sessionID, skill string) int64 {
	if sessionID == "" {
		sessionID = planbus.DefaultSession
	}
	if d.health.Get(sessionID, skill).State == health.Degraded {
		return health.DegradedTimeoutFactor
	}
	return 1
}
