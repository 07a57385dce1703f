package guide

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/request"
	"github.com/planbus/planbus/internal/telemetry"
	"github.com/planbus/planbus/internal/templates"
	"github.com/planbus/planbus/schemas"
)

// Guided sessions (planbus.guide.turn). An agent that runs its tools
// itself calls the endpoint once per turn; the planner plays the turn on
// the template library (templates.GuideTurn, pure) against the session's
// state in KV planbus-guides, writes the new state with compare-and-set,
// and only then publishes the turn's event and answers. Any planner can
// answer any turn: a turn that loses a race with another planner's turn
// of the same session is played again on the state that won.

// Config of the guided sessions of a planner.
type Config struct {
	// Templates is the library turns are played on; nil refuses every
	// turn (the planner has no --templates).
	Templates *templates.Library
	// Tracer records each turn (planbus.guide.turn).
	Tracer trace.Tracer
	// Claim makes the session the caller's if it is no one's, and says
	// why the caller may not act on it if it is another's.
	Claim func(ctx context.Context, caller, sessionID string) error
	// Reject answers an endpoint request with such an error, or with a
	// *request.Error.
	Reject func(req micro.Request, err error)
}

// Service answers planbus.guide.turn (HandleTurn). Create it with New
// and bind it with Open.
type Service struct {
	cfg      Config
	conn     *bus.Conn
	log      zerolog.Logger
	guides   jetstream.KeyValue // planbus-guides
	stopping context.Context    // Open's context: every turn's derives from it
}

// New prepares the guided sessions on conn; log is the planner's.
func New(conn *bus.Conn, cfg Config, log zerolog.Logger) *Service {
	return &Service{cfg: cfg, conn: conn, log: log, stopping: context.Background()}
}

// Open binds the bucket planbus-guides; ctx bounds every turn.
func (s *Service) Open(ctx context.Context) error {
	s.stopping = ctx
	var err error
	if s.guides, err = s.conn.JS.KeyValue(ctx, bus.BucketGuides); err != nil {
		return fmt.Errorf("planner: guides bucket: %w", err)
	}
	return nil
}

// endpointTimeout bounds a turn, as the planner's other endpoints.
const endpointTimeout = 10 * time.Second

// maxGuideConflicts bounds how often one turn is played again after
// losing a compare-and-set to another turn of its session.
const maxGuideConflicts = 16

// guideDoc is a guided session as planbus-guides keeps it.
type guideDoc struct {
	Session templates.GuideSession `json:"session"`
	// LastTurnID and LastReply answer a repeated turn (same turnId) with
	// the reply it got, changing nothing.
	LastTurnID string              `json:"lastTurnId,omitempty"`
	LastReply  *planbus.GuideReply `json:"lastReply,omitempty"`
	UpdatedAt  time.Time           `json:"updatedAt"`
}

// Decode validates a turn against schemas/guide-turn.schema.json
// and decodes it. An error is a *request.Error naming the field.
func Decode(doc []byte) (*planbus.GuideTurn, error) {
	if err := schemas.Validate(schemas.GuideTurn, doc); err != nil {
		return nil, request.SchemaError(err, `want {"sessionId": "...", "message": "...", "domain": "...", "toolResults": [{"tool": "...", "output": ..., "exitCode": 0}]}`)
	}
	var q planbus.GuideTurn
	if err := json.Unmarshal(doc, &q); err != nil {
		return nil, &request.Error{Msg: err.Error()}
	}
	return &q, nil
}

// HandleTurn answers planbus.guide.turn: one turn of a guided session.
func (s *Service) HandleTurn(req micro.Request) {
	q, err := Decode(req.Data())
	if err != nil {
		s.cfg.Reject(req, err)
		return
	}
	if s.cfg.Templates == nil {
		request.Reject(req, "", "this planner has no template library to guide with; start it with --templates FILE")
		return
	}
	ctx, cancel := context.WithTimeout(s.stopping, endpointTimeout)
	defer cancel()
	ctx, span := s.cfg.Tracer.Start(telemetry.Extract(ctx, nats.Header(req.Headers())), telemetry.SpanGuideTurn,
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(telemetry.AttrSessionID.String(q.SessionID)))
	defer span.End()
	if err := s.cfg.Claim(ctx, bus.OwnerOfSubject(req.Subject()), q.SessionID); err != nil {
		s.cfg.Reject(req, err)
		return
	}
	reply, err := s.guideTurn(ctx, q)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		s.log.Warn().Err(err).Str("session_id", q.SessionID).Msg("cannot play a guided turn")
		request.RejectCode(req, planbus.CodeUnavailable, "", err.Error())
		return
	}
	span.SetAttributes(telemetry.AttrTransition.String(reply.Transition))
	if reply.Plan != nil {
		span.SetAttributes(telemetry.AttrTemplate.String(reply.Plan.ID), telemetry.AttrStep.Int(reply.Plan.Step))
	}
	_ = req.RespondJSON(reply)
}

// guideTurn plays turn q on the session's state and stores the result.
func (s *Service) guideTurn(ctx context.Context, q *planbus.GuideTurn) (*planbus.GuideReply, error) {
	for range maxGuideConflicts {
		var doc guideDoc
		var rev uint64
		e, err := s.guides.Get(ctx, q.SessionID)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return nil, fmt.Errorf("planner: guided session %s: %w", q.SessionID, err)
		default:
			rev = e.Revision()
			if err := json.Unmarshal(e.Value(), &doc); err != nil {
				// Not ours to keep: the turn starts the session afresh
				// and overwrites it.
				s.log.Warn().Err(err).Str("session_id", q.SessionID).Msg("unreadable guided session replaced")
				doc = guideDoc{}
			}
		}
		if q.TurnID != "" && q.TurnID == doc.LastTurnID && doc.LastReply != nil {
			return doc.LastReply, nil
		}
		now := time.Now().UTC()
		next, reply := templates.GuideTurn(s.cfg.Templates, doc.Session, templates.GuideInput{
			Message: q.Message, Domain: q.Domain, Results: q.ToolResults, Now: now})
		reply.SessionID = q.SessionID
		if rev == 0 && next.Plan == nil && q.TurnID == "" {
			// No plan before, none after, no turn to remember: nothing
			// to store, and nothing happened (or a plan that could not
			// start, which the reply says).
			return &reply, nil
		}
		nd := guideDoc{Session: next, LastTurnID: q.TurnID, UpdatedAt: now}
		if q.TurnID != "" {
			nd.LastReply = &reply
		}
		data, err := json.Marshal(nd)
		if err != nil {
			return nil, fmt.Errorf("planner: guided session %s: %w", q.SessionID, err)
		}
		if len(data) > s.conn.StoreLimit() {
			return nil, fmt.Errorf("planner: guided session %s: its state takes %d bytes, over the store's limit of %d", q.SessionID, len(data), s.conn.StoreLimit())
		}
		if rev == 0 {
			_, err = s.guides.Create(ctx, q.SessionID, data)
		} else {
			_, err = s.guides.Update(ctx, q.SessionID, data, rev)
		}
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue // another turn of the session won: play this one on its state
		}
		if err != nil {
			return nil, fmt.Errorf("planner: guided session %s: %w", q.SessionID, err)
		}
		s.guideEvent(q.SessionID, &reply)
		return &reply, nil
	}
	return nil, fmt.Errorf("planner: guided session %s: %d turns of the session at once kept overtaking this one; send it again", q.SessionID, maxGuideConflicts)
}

// guideEvent publishes a turn's transition as guide.<transition> on the
// session's events, with the session id as request id. A turn that ended
// its plan and started another publishes the end first, then the
// activation.
func (s *Service) guideEvent(sessionID string, r *planbus.GuideReply) {
	if e := r.Ended; e != nil {
		ev := planbus.Event{Type: planbus.EventGuidePrefix + planbus.EventType(e.Transition), Time: time.Now(), RequestID: sessionID, SessionID: sessionID, Message: e.Message}
		if e.Plan != nil {
			ev.Template = e.Plan.ID
		}
		if r.Check != nil {
			ev.Step = r.Check.Step
		}
		s.publishGuideEvent(sessionID, ev)
	}
	if r.Transition == planbus.GuideNone {
		return
	}
	ev := planbus.Event{Type: planbus.EventGuidePrefix + planbus.EventType(r.Transition), Time: time.Now(), RequestID: sessionID, SessionID: sessionID, Message: r.Message}
	if r.Plan != nil {
		ev.Template, ev.Step = r.Plan.ID, r.Plan.Step
	}
	if r.Check != nil && r.Ended == nil {
		ev.Step = r.Check.Step
	}
	s.publishGuideEvent(sessionID, ev)
}

func (s *Service) publishGuideEvent(sessionID string, ev planbus.Event) {
	data, err := json.Marshal(ev)
	if err != nil {
		return
	}
	_ = s.conn.NC.Publish(bus.EventSubject(sessionID, ev.Type), data)
}
