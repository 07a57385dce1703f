package planner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/execution"
	"github.com/planbus/planbus/internal/request"
	"github.com/planbus/planbus/internal/text"
)

// Cancelling (planbus.plan.cancel). A request that has no plan running
// (queued, or generating) ends cancelled at once: the endpoint stores its
// end with compare-and-set and publishes the outcome, without the
// request's lock, so it never waits for a generation, which it stops if
// it runs in this process (a generation elsewhere finds the loop ended
// when it stores its plan). A request whose plan runs gets a cancel mark
// in its loop state and its plan's dispatchers a durable cancel on
// planbus.timers.<planId> (execution.TimerCancel): the engine ends the
// plan, the dispatcher stops the workers' calls, and the execution
// result, state cancelled, ends the loop cancelled. Both the mark and the
// command are stored before the reply, so the cancel survives a planner
// or dispatcher restart.

// errCancelled is the cause given to a generation stopped by a cancel.
var errCancelled = errors.New("planner: request cancelled")

// errNotFound: no request or plan has the id.
var errNotFound = errors.New("planner: not found")

// cancelTries bounds the compare-and-set rounds of one cancel.
const cancelTries = 10

// generating registers the generation of a request's plan so a cancel can
// stop it; the returned function ends the registration.
func (s *Service) generating(ctx context.Context, requestID string) (context.Context, func()) {
	gctx, cancel := context.WithCancelCause(ctx)
	s.gensMu.Lock()
	s.gens[requestID] = cancel
	s.gensMu.Unlock()
	return gctx, func() {
		s.gensMu.Lock()
		delete(s.gens, requestID)
		s.gensMu.Unlock()
		cancel(nil)
	}
}

// stopGenerating stops the request's generation if it runs in this
// process.
func (s *Service) stopGenerating(requestID string) {
	s.gensMu.Lock()
	defer s.gensMu.Unlock()
	if cancel := s.gens[requestID]; cancel != nil {
		cancel(errCancelled)
	}
}

// reloadCancelled is called when storing l failed with err: if that was a
// lost compare-and-set and the stored loop has ended meanwhile (the cancel
// endpoint ended a queued or generating request), it returns the stored
// loop to carry on from. Any other conflict is left to the caller, which
// hands its message back: a loop only marked for cancelling still waits
// for the message's news (an execution result).
func (s *Service) reloadCancelled(ctx context.Context, l *loop, err error) (*loop, uint64, bool) {
	if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, 0, false
	}
	nl, rev, lerr := s.load(ctx, l.Request.RequestID)
	if lerr != nil || nl == nil || nl.Status != loopDone {
		return nil, 0, false
	}
	return nl, rev, true
}

// publishCancel hands the plan's dispatchers the durable cancel command.
// Its message id is the plan's, so asking again is de-duplicated.
func (s *Service) publishCancel(ctx context.Context, planID string, c *cancelMark) error {
	m := execution.CancelMessage(planID, c.Reason, c.At)
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	ctx, cancel := storeOp(ctx)
	defer cancel()
	if _, err := s.conn.JS.Publish(ctx, bus.TimerSubject(planID), data, jetstream.WithMsgID(m.MsgID())); err != nil {
		return fmt.Errorf("planner: cancel plan %s: %w", planID, err)
	}
	return nil
}

func (s *Service) handleCancel(req micro.Request) {
	q, err := request.DecodeCancel(req.Data())
	if err != nil {
		rejectErr(req, err)
		return
	}
	ctx, cancel := context.WithTimeout(s.stopping, endpointTimeout)
	defer cancel()
	if err := s.mayTarget(ctx, caller(req.Subject()), q.RequestID, q.PlanID); err != nil {
		rejectErr(req, err)
		return
	}
	reply, err := s.cancel(ctx, q, time.Now())
	switch {
	case errors.Is(err, errStoreUnavailable):
		request.RejectCode(req, planbus.CodeUnavailable, "", err.Error())
	case errors.Is(err, errNotFound):
		field, id := "/requestId", q.RequestID
		if q.PlanID != "" {
			field, id = "/planId", q.PlanID
		}
		request.RejectCode(req, planbus.CodeNotFound, field, fmt.Sprintf("no request or plan %q (they are kept for a day)", id))
	case err != nil:
		s.log.Warn().Err(err).Msg("cannot cancel")
		request.RejectCode(req, planbus.CodeUnavailable, "", err.Error())
	default:
		_ = req.RespondJSON(reply)
	}
}

// mayTarget refuses caller a request or plan another client owns (a
// request id may be a plan's, as cancel takes it).
func (s *Service) mayTarget(ctx context.Context, caller, requestID, planID string) error {
	if requestID != "" {
		if err := s.mayRequest(ctx, caller, requestID, "/requestId"); err != nil {
			return err
		}
		planID = requestID
	}
	return s.mayPlan(ctx, caller, planID)
}

// cancel carries out q. A plan id stands for the request the plan belongs
// to; a request id without a request may be a plan's, since a plan
// published directly is its own request.
func (s *Service) cancel(ctx context.Context, q *planbus.CancelRequest, now time.Time) (*planbus.CancelReply, error) {
	mark := &cancelMark{Reason: clipReason(q.Reason), At: now.UTC()}
	if q.PlanID != "" {
		st, err := s.planState(ctx, q.PlanID)
		if err != nil {
			return nil, err
		}
		requestID := ""
		switch {
		case st != nil:
			requestID = st.RequestID
		case strings.LastIndexByte(q.PlanID, '-') > 0:
			// Not started yet: planners name plans <requestId>-<attempt>.
			requestID = q.PlanID[:strings.LastIndexByte(q.PlanID, '-')]
		}
		if requestID != "" {
			l, rev, err := s.load(ctx, requestID)
			if err != nil {
				return nil, err
			}
			if l != nil && (st != nil || l.PlanID == q.PlanID) {
				return s.cancelLoop(ctx, l, rev, mark)
			}
		}
		if st == nil {
			return nil, errNotFound
		}
		return s.cancelPlan(ctx, q.PlanID, st, mark)
	}
	l, rev, err := s.load(ctx, q.RequestID)
	if err != nil {
		return nil, err
	}
	if l != nil {
		return s.cancelLoop(ctx, l, rev, mark)
	}
	r, err := s.queued(ctx, q.RequestID)
	if err != nil {
		return nil, err
	}
	if r != nil {
		return s.cancelQueued(ctx, r, mark)
	}
	// Perhaps a plan's id: cancel what it stands for.
	return s.cancel(ctx, &planbus.CancelRequest{PlanID: q.RequestID, Reason: q.Reason}, now)
}

// cancelLoop cancels a request with a loop state, with compare-and-set:
// a round lost to the loop's own progress is tried again on the new state.
func (s *Service) cancelLoop(ctx context.Context, l *loop, rev uint64, mark *cancelMark) (*planbus.CancelReply, error) {
	id := l.Request.RequestID
	for range cancelTries {
		var err error
		switch {
		case l.Status == loopDone:
			status := ""
			if l.Outcome != nil {
				status = string(l.Outcome.Status)
			}
			return &planbus.CancelReply{RequestID: id, PlanID: l.PlanID, Status: planbus.CancelEnded, Ended: status,
				Message: fmt.Sprintf("request %s had already ended (%s): nothing to cancel", id, status)}, nil
		case l.Status == loopExecuting:
			if l.Cancel == nil {
				l.Cancel = mark
				_, err = s.save(ctx, l, rev)
			}
			if err == nil {
				if err := s.publishCancel(ctx, l.PlanID, l.Cancel); err != nil {
					return nil, err
				}
				s.log.Info().Str("request_id", id).Str("plan_id", l.PlanID).Msg("request cancelling")
				return &planbus.CancelReply{RequestID: id, PlanID: l.PlanID, Status: planbus.CancelCancelling,
					Message: fmt.Sprintf("request %s: plan %s is being cancelled; the outcome follows", id, l.PlanID)}, nil
			}
		default:
			l.Cancel = mark
			s.finish(l, planbus.StatusCancelled, mark.info())
			if _, err = s.save(ctx, l, rev); err == nil {
				s.stopGenerating(id)
				if err := s.publishOutcome(ctx, l.Outcome); err != nil {
					return nil, err
				}
				s.log.Info().Str("request_id", id).Msg("request cancelled")
				return &planbus.CancelReply{RequestID: id, Status: planbus.CancelCancelled,
					Message: fmt.Sprintf("request %s cancelled: no plan was running", id)}, nil
			}
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return nil, err
		}
		if l, rev, err = s.load(ctx, id); err != nil {
			return nil, err
		}
		if l == nil {
			return nil, errNotFound
		}
	}
	return nil, fmt.Errorf("planner: request %s changed %d times while being cancelled; try again", id, cancelTries)
}

// cancelQueued ends a request no planner has taken up yet: its loop state
// is created ended, so the planner that takes it up finds it so and only
// publishes its outcome again.
func (s *Service) cancelQueued(ctx context.Context, r *request.Request, mark *cancelMark) (*planbus.CancelReply, error) {
	l := &loop{Request: r, Status: loopGenerating, Disabled: []string{}, History: []planbus.Attempt{}, Cancel: mark}
	s.finish(l, planbus.StatusCancelled, mark.info())
	_, err := s.save(ctx, l, 0)
	if errors.Is(err, jetstream.ErrKeyExists) {
		// Taken up meanwhile.
		l, rev, err := s.load(ctx, r.RequestID)
		if err != nil {
			return nil, err
		}
		if l == nil {
			return nil, errNotFound
		}
		return s.cancelLoop(ctx, l, rev, mark)
	}
	if _, ok := isTooLarge(err); ok {
		l.Request = slimRequest(l.Request)
		_, err = s.save(ctx, l, 0)
	}
	if err != nil {
		return nil, err
	}
	if err := s.publishOutcome(ctx, l.Outcome); err != nil {
		return nil, err
	}
	return &planbus.CancelReply{RequestID: r.RequestID, Status: planbus.CancelCancelled,
		Message: fmt.Sprintf("request %s cancelled before a planner took it up", r.RequestID)}, nil
}

// cancelPlan cancels a plan submitted without a request.
func (s *Service) cancelPlan(ctx context.Context, planID string, st *planState, mark *cancelMark) (*planbus.CancelReply, error) {
	if st.Status != planbus.PlanRunning {
		return &planbus.CancelReply{RequestID: st.RequestID, PlanID: planID, Status: planbus.CancelEnded, Ended: string(st.Status),
			Message: fmt.Sprintf("plan %s had already ended (%s): nothing to cancel", planID, st.Status)}, nil
	}
	if err := s.publishCancel(ctx, planID, mark); err != nil {
		return nil, err
	}
	return &planbus.CancelReply{RequestID: st.RequestID, PlanID: planID, Status: planbus.CancelCancelling,
		Message: fmt.Sprintf("plan %s is being cancelled; its execution result follows", planID)}, nil
}

// planState is what the planner reads of a plan's stored state.
type planState struct {
	RequestID string            `json:"requestId"`
	Status    planbus.PlanState `json:"status"`
}

// planState reads the state of plan id, or nil if it has none.
func (s *Service) planState(ctx context.Context, id string) (*planState, error) {
	e, err := s.plans.Get(ctx, bus.StateKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st planState
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		return nil, fmt.Errorf("planner: state of plan %s: %w", id, err)
	}
	return &st, nil
}

// acceptedMsg returns the message of the request accepted under id in
// the REQUESTS stream, or nil.
func (s *Service) acceptedMsg(ctx context.Context, id string) (*jetstream.RawStreamMsg, error) {
	m, err := s.accepted.GetLastMsgForSubject(ctx, bus.RequestSubject(id))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	return m, err
}

// queued returns the accepted request id, if it is in the REQUESTS
// stream, or nil.
func (s *Service) queued(ctx context.Context, id string) (*request.Request, error) {
	m, err := s.acceptedMsg(ctx, id)
	if m == nil || err != nil {
		return nil, err
	}
	r, err := request.Decode(m.Data)
	if err != nil {
		return nil, nil // published around the endpoint, and not a request: nothing to cancel
	}
	r.RequestID = id
	return r, nil
}

// clipReason cuts a reason to what the schema allows.
func clipReason(s string) string { return text.Clip(s, execution.MaxCancelReason) }

// rejectErr answers an endpoint request with the *request.Error err.
func rejectErr(req micro.Request, err error) {
	var fe *forbiddenError
	if errors.As(err, &fe) {
		request.RejectCode(req, planbus.CodeForbidden, fe.field, fe.Error())
		return
	}
	if errors.Is(err, errStoreUnavailable) {
		request.RejectCode(req, planbus.CodeUnavailable, "", err.Error())
		return
	}
	var re *request.Error
	if errors.As(err, &re) {
		request.Reject(req, re.Field, re.Error())
		return
	}
	request.Reject(req, "", err.Error())
}
