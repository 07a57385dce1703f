package planner

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/request"
	"github.com/planbus/planbus/internal/text"
)

// The loop state of a request (KV planbus-requests) and the messages the
// planner publishes must fit the store's limit: a value or message of at
// most bus.Config.MaxPayload bytes. A loop state holds the request, the
// plan being executed, the history and the last execution result. The
// endpoint keeps half of the limit for the plan (maxRequestBytes); an
// execution result that would not fit is kept without its outputs, then
// without its tools; a plan that does not fit beside its request fails
// its generation (PLAN_TOO_LARGE); a request that does not fit at all
// (published around the endpoint) ends at once (REQUEST_TOO_LARGE).

// storeMargin is room left in every stored value for headers and for
// the fields of the loop state besides the request and the plan.
const storeMargin = 64 << 10

// maxErrorMessage bounds the error messages a loop state keeps.
const maxErrorMessage = 4 << 10

// tooLargeError is a loop state that does not fit the store.
type tooLargeError struct {
	size, limit int
}

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("planner: the loop state takes %d bytes, over the store's limit of %d", e.size, e.limit)
}

// storeLimit is the most bytes one value or message may take
// (bus.Conn.StoreLimit).
func (s *Service) storeLimit() int { return s.conn.StoreLimit() }

// maxRequestBytes is the most an encoded request may take: half of what
// its loop state may, so that the plan it runs fits beside it.
func (s *Service) maxRequestBytes() int { return (s.storeLimit() - storeMargin) / 2 }

// checkSize refuses a request, encoded as data (r: decoded, nil if not
// yet), whose loop state could not be stored: it names the request's size
// and the store's limit.
func (s *Service) checkSize(r *request.Request, data []byte) error {
	limit, most := s.storeLimit(), s.maxRequestBytes()
	if len(data) > most {
		return &request.Error{Msg: fmt.Sprintf("the request takes %d bytes; with room for the plan it runs, its loop state would not fit the store's limit of %d bytes (max payload %d): a request may take at most %d bytes",
			len(data), limit, limit+4096, most)}
	}
	if r != nil && r.Kind == request.KindPlan {
		// The loop state holds the request and the plan it runs, which
		// is the request's own plan with its defaults filled in.
		p, err := plan.Decode(r.Plan)
		if err != nil {
			return nil // refused with its own reason by the caller
		}
		stamped, _ := json.Marshal(p)
		if need := len(data) + len(stamped) + storeMargin; need > limit {
			return &request.Error{Field: "/plan", Msg: fmt.Sprintf("the request takes %d bytes and its plan %d with its defaults; its loop state would take %d bytes, over the store's limit of %d bytes (max payload %d)",
				len(data), len(stamped), need, limit, limit+4096)}
		}
	}
	return nil
}

// encodeLoop encodes a loop state within limit, if need be without the
// outputs of its executions, then without the results later attempts
// could reuse (they run those tools again), then without the executions'
// tools (the outputs stay in the RESULTS stream). It reports whether the
// state fits.
func encodeLoop(l *loop, limit int) ([]byte, bool) {
	data, err := json.Marshal(l)
	if err != nil {
		return nil, false
	}
	executions := func(slim func(*planbus.ExecutionResult) *planbus.ExecutionResult) func() {
		return func() {
			l.Last = slim(l.Last)
			if l.Outcome != nil {
				l.Outcome.Execution = slim(l.Outcome.Execution)
			}
		}
	}
	for _, slim := range []func(){executions(withoutOutputs), func() { l.Reusable = nil }, executions(withoutTools)} {
		if len(data) <= limit {
			return data, true
		}
		slim()
		if data, err = json.Marshal(l); err != nil {
			return nil, false
		}
	}
	return data, len(data) <= limit
}

func withoutOutputs(res *planbus.ExecutionResult) *planbus.ExecutionResult {
	if res == nil || res.OutputsOmitted {
		return res
	}
	slim := *res
	slim.OutputsOmitted = true
	slim.Tools = append([]planbus.ToolOutcome(nil), res.Tools...)
	for i := range slim.Tools {
		slim.Tools[i].Output = nil
	}
	return &slim
}

func withoutTools(res *planbus.ExecutionResult) *planbus.ExecutionResult {
	if res == nil {
		return nil
	}
	slim := *res
	slim.OutputsOmitted, slim.ToolsOmitted = true, true
	slim.Tools = []planbus.ToolOutcome{}
	return &slim
}

// slimRequest keeps what a finished loop needs of its request.
func slimRequest(r *request.Request) *request.Request {
	return &request.Request{RequestID: r.RequestID, SessionID: r.SessionID, Kind: r.Kind, MaxAttempts: r.MaxAttempts}
}

// requestTooLarge ends a loop whose request, of reqSize bytes as it
// arrived, does not fit the store.
func (s *Service) requestTooLarge(l *loop, reqSize int, tl *tooLargeError) {
	s.stats.TooLarge.Add(1)
	l.Request = slimRequest(l.Request)
	s.finish(l, planbus.StatusFailed, &planbus.ErrorInfo{Code: planbus.CodeRequestTooLarge, Category: planbus.CategoryInvalidInput,
		Message: fmt.Sprintf("the request takes %d bytes and its loop state %d, over the store's limit of %d bytes (max payload); requests may take at most %d bytes",
			reqSize, tl.size, tl.limit, s.maxRequestBytes())})
}

// planTooLarge turns an attempt whose plan does not fit beside its request
// into a failed generation, which would fail the same way again.
func (s *Service) planTooLarge(l *loop, tl *tooLargeError) {
	s.stats.TooLarge.Add(1)
	info := &planbus.ErrorInfo{Code: planbus.CodePlanTooLarge, Category: planbus.CategoryPermanent,
		Message: fmt.Sprintf("attempt %d's plan takes %d bytes; with the request and the loop's history its state takes %d bytes, over the store's limit of %d bytes (max payload)",
			l.Attempt, len(l.Plan), tl.size, tl.limit)}
	l.History = append(l.History, planbus.Attempt{Attempt: l.Attempt, State: planbus.AttemptGenerationFailed, Error: info, DisabledSkills: l.Disabled})
	l.Status, l.Plan, l.PlanID = loopGenerating, nil, ""
	s.finish(l, planbus.StatusFallback, info)
}

// isTooLarge reports whether err is a loop state too large to store.
func isTooLarge(err error) (*tooLargeError, bool) {
	var tl *tooLargeError
	return tl, errors.As(err, &tl)
}

// trimmed is e with its message cut to maxErrorMessage.
func trimmed(e *planbus.ErrorInfo) *planbus.ErrorInfo {
	if e == nil || len(e.Message) <= maxErrorMessage {
		return e
	}
	c := *e
	c.Message = text.Clip(c.Message, maxErrorMessage)
	return &c
}

// casLost reports whether a compare-and-set lost to another writer.
func casLost(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)
}
