package planner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/robfig/cron/v3"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/request"
	"github.com/planbus/planbus/internal/wire"
)

// Schedules (planbus.schedule.*). A schedule is a message schedule of
// the SCHEDULES stream: its message, on planbus.schedules.def.<name>,
// holds the planbus.Schedule (the request among it) and the headers that
// make the server store a copy on planbus.schedules.tick.<name> at every
// tick. The server fires each tick once, whichever planners run, and
// keeps firing across restarts of everything; the planners share one
// consumer of the ticks and submit each as the request NAME-<the tick's
// stream sequence>, so a tick delivered twice (its planner died before
// acknowledging it) is the same request, accepted once. A paused schedule
// is the same message without the schedule headers, on
// planbus.schedules.paused.<name>. A tick the server missed while it was
// down is skipped (after a restart the schedule fires at its next time),
// unless the schedule catches up (missed "catchup"): then a starting
// planner submits the latest missed one (catchUp).

// maxCron bounds a schedule pattern.
const maxCron = 256

// Headers of the server's message schedules (ADR-51).
const (
	headerSchedule         = "Nats-Schedule"
	headerScheduleTarget   = "Nats-Schedule-Target"
	headerScheduleTimeZone = "Nats-Schedule-Time-Zone"
)

func (s *Service) handleScheduleAdd(req micro.Request) {
	spec, err := decodeScheduleSpec(req.Data())
	if err != nil {
		rejectErr(req, err)
		return
	}
	ctx, cancel := context.WithTimeout(s.stopping, endpointTimeout)
	defer cancel()
	sc, err := s.addSchedule(ctx, spec, caller(req.Subject()), time.Now())
	s.respondSchedule(req, sc, err, "add")
}

func (s *Service) handleScheduleList(req micro.Request) {
	ctx, cancel := context.WithTimeout(s.stopping, endpointTimeout)
	defer cancel()
	list, err := s.listSchedules(ctx, caller(req.Subject()))
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
	var q planbus.ScheduleName
	if err := strictJSON(req.Data(), &q); err != nil {
		request.Reject(req, "", fmt.Sprintf(`want {"name": "..."}: %v`, err))
		return
	}
	if !wire.IsName(q.Name) {
		request.Reject(req, "/name", fmt.Sprintf("schedule name %q: want 1 to 64 letters, digits, '_' or '-'", q.Name))
		return
	}
	ctx, cancel := context.WithTimeout(s.stopping, endpointTimeout)
	defer cancel()
	sc, err := s.changeSchedule(ctx, q.Name, verb, caller(req.Subject()))
	s.respondSchedule(req, sc, err, verb)
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

// strictJSON decodes one JSON object into v, refusing unknown fields.
func strictJSON(doc []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(doc))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

// decodeScheduleSpec checks a schedule to add: its name, pattern, zone
// and request (as the request endpoint would).
func decodeScheduleSpec(doc []byte) (*planbus.ScheduleSpec, error) {
	var spec planbus.ScheduleSpec
	if err := strictJSON(doc, &spec); err != nil {
		return nil, &request.Error{Msg: fmt.Sprintf(`want {"name", "cron", "request"} and optionally "timeZone": %v`, err)}
	}
	if !wire.IsName(spec.Name) {
		return nil, &request.Error{Field: "/name", Msg: fmt.Sprintf("schedule name %q: want 1 to 64 letters, digits, '_' or '-'", spec.Name)}
	}
	spec.Cron = strings.TrimSpace(spec.Cron)
	if spec.Cron == "" || len(spec.Cron) > maxCron || strings.ContainsAny(spec.Cron, "\r\n") {
		return nil, &request.Error{Field: "/cron", Msg: `want a pattern: six cron fields with seconds ("0 30 2 * * *"), @hourly, @daily, or @every 10m`}
	}
	if spec.TimeZone != "" {
		if strings.HasPrefix(spec.Cron, "@every") {
			return nil, &request.Error{Field: "/timeZone", Msg: "@every takes no time zone"}
		}
		if _, err := time.LoadLocation(spec.TimeZone); err != nil || strings.ContainsAny(spec.TimeZone, "\r\n") {
			return nil, &request.Error{Field: "/timeZone", Msg: fmt.Sprintf("time zone %q: want an IANA name such as Europe/Lisbon", spec.TimeZone)}
		}
	}
	switch spec.Missed {
	case "", planbus.MissedSkip:
	case planbus.MissedCatchUp:
		if _, err := cronSchedule(&spec); err != nil {
			return nil, &request.Error{Field: "/cron", Msg: fmt.Sprintf("missed %q needs a pattern planbus can read to find the ticks it missed: %v", spec.Missed, err)}
		}
	default:
		return nil, &request.Error{Field: "/missed", Msg: fmt.Sprintf("missed %q: want skip or catchup", spec.Missed)}
	}
	if r := bytes.TrimSpace(spec.Request); len(r) == 0 || string(r) == "null" {
		return nil, &request.Error{Field: "/request", Msg: "the request to send at each tick is missing"}
	}
	if _, err := request.Decode(spec.Request); err != nil {
		var re *request.Error
		if errors.As(err, &re) {
			return nil, &request.Error{Field: "/request" + re.Field, Msg: re.Msg}
		}
		return nil, err
	}
	return &spec, nil
}

// addSchedule stores a new schedule; its name must be free.
func (s *Service) addSchedule(ctx context.Context, spec *planbus.ScheduleSpec, owner string, now time.Time) (*planbus.Schedule, error) {
	if err := s.checkSize(nil, spec.Request); err != nil {
		return nil, err
	}
	if old, _, err := s.scheduleOf(ctx, spec.Name); err != nil {
		return nil, err
	} else if old != nil {
		return nil, &refusal{planbus.CodeInvalidRequest, "/name", fmt.Sprintf("a schedule %s exists (added %s); remove it first (planner schedule rm %s)",
			spec.Name, old.CreatedAt.UTC().Format(time.RFC3339), spec.Name)}
	}
	sc := &planbus.Schedule{ScheduleSpec: *spec, Owner: owner, CreatedAt: now.UTC()}
	// Expected last subject sequence 0: two planners adding one name at
	// once store one of them.
	if err := s.storeSchedule(ctx, sc, jetstream.WithExpectLastSequencePerSubject(0)); err != nil {
		var ae *jetstream.APIError
		if errors.As(err, &ae) && (ae.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || ae.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return nil, &refusal{planbus.CodeInvalidRequest, "/name", fmt.Sprintf("a schedule %s was just added", spec.Name)}
		}
		if errors.As(err, &ae) && ae.Code == 400 {
			return nil, &request.Error{Field: "/cron", Msg: fmt.Sprintf("the NATS server refuses the pattern %q: %s", spec.Cron, ae.Description)}
		}
		return nil, err
	}
	s.log.Info().Str("schedule", sc.Name).Str("cron", sc.Cron).Str("owner", owner).Msg("schedule added")
	return sc, nil
}

// storeSchedule writes sc: as a message schedule, or paused.
func (s *Service) storeSchedule(ctx context.Context, sc *planbus.Schedule, opts ...jetstream.PublishOpt) error {
	data, err := json.Marshal(sc)
	if err != nil {
		return err
	}
	subject := bus.SchedulePausedSubject(sc.Name)
	m := nats.NewMsg(subject)
	if !sc.Paused {
		m.Subject = bus.ScheduleSubject(sc.Name)
		m.Header.Set(headerSchedule, sc.Cron)
		m.Header.Set(headerScheduleTarget, bus.ScheduleTickSubject(sc.Name))
		if sc.TimeZone != "" {
			m.Header.Set(headerScheduleTimeZone, sc.TimeZone)
		}
	}
	m.Data = data
	ctx, cancel := storeOp(ctx)
	defer cancel()
	_, err = s.conn.JS.PublishMsg(ctx, m, opts...)
	return err
}

// scheduleOf reads schedule name, running or paused; nil if there is
// none.
func (s *Service) scheduleOf(ctx context.Context, name string) (*planbus.Schedule, uint64, error) {
	ctx, cancel := storeOp(ctx)
	defer cancel()
	for _, subject := range []string{bus.ScheduleSubject(name), bus.SchedulePausedSubject(name)} {
		m, err := s.schedules.GetLastMsgForSubject(ctx, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, 0, fmt.Errorf("planner: schedule %s: %w", name, err)
		}
		var sc planbus.Schedule
		if err := json.Unmarshal(m.Data, &sc); err != nil {
			return nil, 0, fmt.Errorf("planner: schedule %s: stored message %d: %w", name, m.Sequence, err)
		}
		return &sc, m.Sequence, nil
	}
	return nil, 0, nil
}

// changeSchedule removes, pauses or resumes schedule name.
func (s *Service) changeSchedule(ctx context.Context, name, verb, caller string) (*planbus.Schedule, error) {
	sc, _, err := s.scheduleOf(ctx, name)
	if err != nil {
		return nil, err
	}
	if sc == nil {
		return nil, &refusal{planbus.CodeNotFound, "/name", fmt.Sprintf("no schedule %s (planner schedule ls lists them)", name)}
	}
	if !mayUseSchedule(sc, caller) {
		return nil, &forbiddenError{field: "/name", what: "schedule " + name, owner: sc.Owner, caller: caller}
	}
	purge := func(subject string) error {
		ctx, cancel := storeOp(ctx)
		defer cancel()
		return s.schedules.Purge(ctx, jetstream.WithPurgeSubject(subject))
	}
	switch verb {
	case "rm":
		for _, subject := range []string{bus.ScheduleSubject(name), bus.SchedulePausedSubject(name), bus.ScheduleTickSubject(name)} {
			if err := purge(subject); err != nil {
				return nil, fmt.Errorf("planner: remove schedule %s: %w", name, err)
			}
		}
	case "pause", "resume":
		if sc.Paused == (verb == "pause") {
			return sc, nil // already so
		}
		sc.Paused = verb == "pause"
		if !sc.Paused {
			sc.ResumedAt = time.Now().UTC()
		}
		// The new message first, then the old one's subject purged: a
		// planner that dies between leaves both, and the next pause or
		// resume (or rm) settles it.
		if err := s.storeSchedule(ctx, sc); err != nil {
			return nil, fmt.Errorf("planner: %s schedule %s: %w", verb, name, err)
		}
		old := bus.ScheduleSubject(name)
		if verb == "resume" {
			old = bus.SchedulePausedSubject(name)
		}
		if err := purge(old); err != nil {
			return nil, fmt.Errorf("planner: %s schedule %s: %w", verb, name, err)
		}
	}
	s.log.Info().Str("schedule", name).Str("verb", verb).Msg("schedule changed")
	return sc, nil
}

// mayUseSchedule: a schedule a named client added is that client's alone,
// as its requests are; one of the shared client role is everyone's.
func mayUseSchedule(sc *planbus.Schedule, caller string) bool {
	return sc.Owner == "" || sc.Owner == caller
}

// listSchedules lists the schedules the caller may see, with their last
// ticks.
func (s *Service) listSchedules(ctx context.Context, caller string) (*planbus.ScheduleList, error) {
	sctx, cancel := storeOp(ctx)
	defer cancel()
	info, err := s.schedules.Info(sctx, jetstream.WithSubjectFilter(bus.SubjectSchedulesAll))
	if err != nil {
		return nil, fmt.Errorf("planner: schedules: %w", err)
	}
	ticks := map[string]uint64{}
	var names []string
	for subject, n := range info.State.Subjects {
		rest, _ := strings.CutPrefix(subject, "planbus.schedules.")
		kind, name, _ := strings.Cut(rest, ".")
		switch kind {
		case "tick":
			ticks[name] = n
		case "def", "paused":
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	list := &planbus.ScheduleList{Schedules: []planbus.Schedule{}}
	for _, name := range names {
		sc, _, err := s.scheduleOf(ctx, name)
		if err != nil {
			return nil, err
		}
		if sc == nil || !mayUseSchedule(sc, caller) {
			continue
		}
		if n := ticks[name]; n > 0 {
			sc.Ticks = int(n)
			gctx, cancel := storeOp(ctx)
			m, err := s.schedules.GetLastMsgForSubject(gctx, bus.ScheduleTickSubject(name))
			cancel()
			if err == nil {
				sc.LastTick, sc.LastRequestID = m.Time.UTC(), tickRequestID(name, m.Sequence)
			}
		}
		list.Schedules = append(list.Schedules, *sc)
	}
	return list, nil
}

// tickRequestID is the request id of a schedule's tick: unique, as the
// tick's stream sequence is, and the same for every delivery of it.
func tickRequestID(name string, seq uint64) string {
	return name + "-" + strconv.FormatUint(seq, 10)
}

// onTick submits a tick's request, under the tick's request id, as its
// schedule's owner.
func (s *Service) onTick(ctx context.Context, m jetstream.Msg) error {
	meta, err := m.Metadata()
	if err != nil {
		return err
	}
	name := strings.TrimPrefix(m.Subject(), "planbus.schedules.tick.")
	var sc planbus.Schedule
	if err := json.Unmarshal(m.Data(), &sc); err != nil || len(sc.Request) == 0 {
		s.log.Error().Err(err).Str("schedule", name).Uint64("seq", meta.Sequence.Stream).Msg("a tick that is not a schedule: dropped")
		s.stats.Dropped.Add(1)
		return m.Term()
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(sc.Request, &fields); err != nil {
		s.log.Error().Err(err).Str("schedule", name).Msg("a schedule's request is not a JSON object: tick dropped")
		s.stats.Dropped.Add(1)
		return m.Term()
	}
	id := tickRequestID(name, meta.Sequence.Stream)
	fields["requestId"], _ = json.Marshal(id)
	doc, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	_, again, err := s.accept(ctx, doc, sc.Owner)
	var re *request.Error
	var fe *forbiddenError
	switch {
	case errors.As(err, &re), errors.As(err, &fe):
		// Refused for good (its owner lost a grant, a budget shrank): the
		// tick is logged and dropped, the schedule goes on.
		s.log.Error().Err(err).Str("schedule", name).Str("requestId", id).Msg("a schedule's request was refused")
		s.stats.Dropped.Add(1)
		return m.Term()
	case err != nil:
		return err
	}
	ev := s.log.Info()
	if again != nil {
		ev = s.log.Debug()
	}
	ev.Str("schedule", name).Str("requestId", id).Bool("again", again != nil).Msg("schedule ticked")
	return m.Ack()
}

// abandonTick ends a tick that could not be submitted DeliveryLimit
// times.
func (s *Service) abandonTick(_ context.Context, m jetstream.Msg, deliveries int, cause error) error {
	s.log.Error().AnErr("cause", cause).Str("subject", m.Subject()).Int("deliveries", deliveries).Msg("a schedule's tick could not be submitted: dropped")
	s.stats.Dropped.Add(1)
	return m.Term()
}

// cronParser reads the patterns the server's message schedules take:
// six fields with seconds, the @ descriptors, @every.
var cronParser = cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// cronSchedule is spec's pattern, to find the ticks it missed.
func cronSchedule(spec *planbus.ScheduleSpec) (cron.Schedule, error) {
	pattern := spec.Cron
	if spec.TimeZone != "" {
		pattern = "CRON_TZ=" + spec.TimeZone + " " + pattern
	}
	return cronParser.Parse(pattern)
}

// catchUpSlack is how late a tick may be before it is taken as missed;
// catchUpWindow how recent the end of a gap in the ticks must be for a
// starting planner to catch it up (older gaps were a planner's to catch
// when it started then).
const (
	catchUpSlack  = time.Second
	catchUpWindow = 10 * time.Minute
)

// tickTimes are the times of schedule name's kept ticks, oldest first.
func (s *Service) tickTimes(ctx context.Context, name string) ([]time.Time, error) {
	ctx, cancel := storeOp(ctx)
	defer cancel()
	info, err := s.schedules.Info(ctx)
	if err != nil {
		return nil, err
	}
	var times []time.Time
	seq := info.State.FirstSeq
	for range bus.ScheduleTicksKept * 2 {
		m, err := s.schedules.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(bus.ScheduleTickSubject(name)))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
		times, seq = append(times, m.Time), m.Sequence+1
	}
	return times, nil
}

// missedTick finds, in a schedule's kept ticks and now, the latest gap
// where ticks were due and none came (the system was down), and returns
// the last tick due in it; zero if there is none, or it ended longer
// than catchUpWindow ago.
func missedTick(sched cron.Schedule, created time.Time, ticks []time.Time, now time.Time) time.Time {
	var missed time.Time
	prev := created
	for _, at := range append(ticks, now) {
		due := sched.Next(prev)
		if !due.IsZero() && due.Before(at.Add(-catchUpSlack)) && now.Sub(at) < catchUpWindow {
			for next := sched.Next(due); !next.IsZero() && next.Before(at.Add(-catchUpSlack)); next = sched.Next(next) {
				due = next
			}
			missed = due
		}
		prev = at
	}
	return missed
}

// catchUp submits, for each running schedule that catches up, the
// latest tick it missed while the system was down (missedTick). Its
// request id names the tick's due time, so every planner that starts
// submits the same request, accepted once. Run calls it as a planner
// starts.
func (s *Service) catchUp(ctx context.Context, now time.Time) {
	list, err := s.listSchedules(ctx, "")
	if err != nil {
		s.log.Warn().Err(err).Msg("cannot look for missed ticks of schedules")
		return
	}
	for i := range list.Schedules {
		sc := &list.Schedules[i]
		if sc.Paused || sc.Missed != planbus.MissedCatchUp {
			continue
		}
		sched, err := cronSchedule(&sc.ScheduleSpec)
		if err != nil {
			continue
		}
		ticks, err := s.tickTimes(ctx, sc.Name)
		if err != nil {
			s.log.Warn().Err(err).Str("schedule", sc.Name).Msg("cannot read a schedule's ticks")
			continue
		}
		since := sc.CreatedAt
		if sc.ResumedAt.After(since) {
			// Ticks skipped while it was paused were not missed.
			since = sc.ResumedAt
			ticks = slices.DeleteFunc(ticks, func(at time.Time) bool { return at.Before(since) })
		}
		due := missedTick(sched, since, ticks, now)
		if due.IsZero() {
			continue
		}
		var fields map[string]json.RawMessage
		if json.Unmarshal(sc.Request, &fields) != nil {
			continue
		}
		id := fmt.Sprintf("%s-missed-%d", sc.Name, due.Unix())
		fields["requestId"], _ = json.Marshal(id)
		doc, _ := json.Marshal(fields)
		_, again, err := s.accept(ctx, doc, sc.Owner)
		if err != nil {
			s.log.Warn().Err(err).Str("schedule", sc.Name).Str("requestId", id).Msg("cannot submit a missed tick")
			continue
		}
		if again == nil {
			s.log.Info().Str("schedule", sc.Name).Str("requestId", id).Time("due", due).Msg("schedule caught up a missed tick")
		}
	}
}
