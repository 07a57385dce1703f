package planner

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/request"
	"github.com/planbus/planbus/internal/schedule"
)

// Schedules (planbus.schedule.*): the endpoints over package schedule, the
// planners' shared consumer of the ticks (onTick), and the catch-up of
// missed ticks as a planner starts (catchUp).

func (s *Service) handleScheduleAdd(req micro.Request) {
	spec, err := schedule.DecodeSpec(req.Data())
	if err != nil {
		rejectErr(req, err)
		return
	}
	ctx, cancel := context.WithTimeout(s.stopping, endpointTimeout)
	defer cancel()
	if err := s.checkSize(nil, spec.Request); err != nil {
		rejectErr(req, err)
		return
	}
	sc, err := s.schedules.Add(ctx, spec, caller(req.Subject()), time.Now())
	if err == nil {
		s.log.Info().Str("schedule", sc.Name).Str("cron", sc.Cron).Str("owner", sc.Owner).Msg("schedule added")
	}
	s.respondSchedule(req, sc, scheduleError(err, ""), "add")
}

func (s *Service) handleScheduleList(req micro.Request) {
	ctx, cancel := context.WithTimeout(s.stopping, endpointTimeout)
	defer cancel()
	list, err := s.schedules.List(ctx, caller(req.Subject()))
	if err != nil {
		s.log.Warn().Err(err).Msg("cannot list schedules")
		request.RejectCode(req, planbus.CodeUnavailable, "", err.Error())
		return
	}
	_ = req.RespondJSON(list)
}

func (s *Service) handleScheduleRemove(req micro.Request) { s.scheduleVerb(req, "rm") }
func (s *Service) handleSchedulePause(req micro.Request)  { s.scheduleVerb(req, "pause") }
func (s *Service) handleScheduleResume(req micro.Request) { s.scheduleVerb(req, "resume") }

// scheduleVerb removes, pauses or resumes the schedule req names.
func (s *Service) scheduleVerb(req micro.Request, verb string) {
	q, err := schedule.DecodeName(req.Data())
	if err != nil {
		rejectErr(req, err)
		return
	}
	ctx, cancel := context.WithTimeout(s.stopping, endpointTimeout)
	defer cancel()
	sc, err := s.schedules.Change(ctx, q.Name, verb, caller(req.Subject()))
	if err == nil {
		s.log.Info().Str("schedule", q.Name).Str("verb", verb).Msg("schedule changed")
	}
	s.respondSchedule(req, sc, scheduleError(err, caller(req.Subject())), verb)
}

func (s *Service) respondSchedule(req micro.Request, sc *planbus.Schedule, err error, verb string) {
	var rf *refusal
	var re *request.Error
	var fe *forbiddenError
	switch {
	case errors.As(err, &rf):
		request.RejectCode(req, rf.code, rf.field, rf.msg)
	case errors.As(err, &re), errors.As(err, &fe):
		rejectErr(req, err)
	case err != nil:
		s.log.Warn().Err(err).Str("verb", verb).Msg("schedule")
		request.RejectCode(req, planbus.CodeUnavailable, "", err.Error())
	default:
		_ = req.RespondJSON(sc)
	}
}

// scheduleError is a refusal of package schedule as the planner's.
func scheduleError(err error, caller string) error {
	var rf *schedule.Refusal
	var fb *schedule.Forbidden
	switch {
	case errors.As(err, &rf):
		return &refusal{rf.Code, rf.Field, rf.Msg}
	case errors.As(err, &fb):
		return &forbiddenError{field: "/name", what: "schedule " + fb.Name, owner: fb.Owner, caller: caller}
	}
	return err
}

// onTick submits a tick's request, under the tick's request id, as its
// schedule's owner.
func (s *Service) onTick(ctx context.Context, m jetstream.Msg) error {
	doc, id, sc, err := schedule.TickRequest(m)
	if err != nil {
		s.log.Error().Err(err).Str("subject", m.Subject()).Msg("a tick that cannot be submitted: dropped")
		s.stats.Dropped.Add(1)
		return m.Term()
	}
	_, again, err := s.accept(ctx, doc, sc.Owner)
	var re *request.Error
	var fe *forbiddenError
	switch {
	case errors.As(err, &re), errors.As(err, &fe):
		// Refused for good (its owner lost a grant, a budget shrank): the
		// tick is logged and dropped, the schedule goes on.
		s.log.Error().Err(err).Str("schedule", sc.Name).Str("requestId", id).Msg("a schedule's request was refused")
		s.stats.Dropped.Add(1)
		return m.Term()
	case err != nil:
		return err
	}
	ev := s.log.Info()
	if again != nil {
		ev = s.log.Debug()
	}
	ev.Str("schedule", sc.Name).Str("requestId", id).Bool("again", again != nil).Msg("schedule ticked")
	return m.Ack()
}

// abandonTick ends a tick that could not be submitted DeliveryLimit
// times.
func (s *Service) abandonTick(_ context.Context, m jetstream.Msg, deliveries int, cause error) error {
	s.log.Error().AnErr("cause", cause).Str("subject", m.Subject()).Int("deliveries", deliveries).Msg("a schedule's tick could not be submitted: dropped")
	s.stats.Dropped.Add(1)
	return m.Term()
}

// catchUp submits, for each running schedule that catches up, the latest
// tick it missed while the system was down (schedule.Store.Missed), under
// an id that names the tick's due time: every planner that starts submits
// the same request, accepted once. Run calls it as a planner starts.
func (s *Service) catchUp(ctx context.Context, now time.Time) {
	missed, err := s.schedules.Missed(ctx, now, func(name string, err error) {
		s.log.Warn().Err(err).Str("schedule", name).Msg("cannot look for a schedule's missed ticks")
	})
	if err != nil {
		s.log.Warn().Err(err).Msg("cannot look for missed ticks of schedules")
		return
	}
	for _, ms := range missed {
		_, again, err := s.accept(ctx, ms.Doc, ms.Schedule.Owner)
		if err != nil {
			s.log.Warn().Err(err).Str("schedule", ms.Schedule.Name).Str("requestId", ms.ID).Msg("cannot submit a missed tick")
			continue
		}
		if again == nil {
			s.log.Info().Str("schedule", ms.Schedule.Name).Str("requestId", ms.ID).Time("due", ms.Due).Msg("schedule caught up a missed tick")
		}
	}
}
