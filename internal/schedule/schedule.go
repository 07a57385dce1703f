// Package schedule keeps the schedules of requests (planner schedule,
// planbus.schedule.*) in the SCHEDULES stream. A schedule is a message
// schedule: its message, on planbus.schedules.def.<name>, holds the
// planbus.Schedule (the request among it) and the headers that make the
// server store a copy on planbus.schedules.tick.<name> at every tick. The
// server fires each tick once, whichever planners run, and keeps firing
// across restarts of everything; the planners share one consumer of the
// ticks and submit each as the request NAME-<the tick's stream sequence>
// (TickRequest), so a tick delivered twice is the same request, accepted
// once. A paused schedule is the same message without the schedule
// headers, on planbus.schedules.paused.<name>. A tick the server missed
// while it was down is skipped (after a restart the schedule fires at its
// next time), unless the schedule catches up (missed "catchup"): then a
// starting planner submits the latest missed one (Store.Missed).
package schedule

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
	"github.com/robfig/cron/v3"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/request"
	"github.com/planbus/planbus/internal/wire"
)

// maxCron bounds a schedule pattern.
const maxCron = 256

// Headers of the server's message schedules (ADR-51).
const (
	headerSchedule         = "Nats-Schedule"
	headerScheduleTarget   = "Nats-Schedule-Target"
	headerScheduleTimeZone = "Nats-Schedule-Time-Zone"
)

// opTimeout bounds each read or write of the store.
const opTimeout = 15 * time.Second

func storeOp(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, opTimeout)
}

// Refusal is what the store refuses: a name taken, a schedule that is not
// there, with the reply code and the field.
type Refusal struct {
	Code       planbus.Code
	Field, Msg string
}

func (r *Refusal) Error() string { return r.Msg }

// Forbidden: the schedule is another named client's.
type Forbidden struct {
	Name, Owner string
}

func (f *Forbidden) Error() string {
	return fmt.Sprintf("schedule %s belongs to client %s", f.Name, f.Owner)
}

// Store reads and writes the schedules.
type Store struct {
	js     jetstream.JetStream
	stream jetstream.Stream
}

// Open binds the SCHEDULES stream.
func Open(ctx context.Context, js jetstream.JetStream) (*Store, error) {
	st, err := js.Stream(ctx, bus.StreamSchedules)
	if err != nil {
		return nil, fmt.Errorf("schedules stream: %w", err)
	}
	return &Store{js: js, stream: st}, nil
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

// DecodeName reads the body of planbus.schedule.rm, .pause and .resume.
func DecodeName(doc []byte) (*planbus.ScheduleName, error) {
	var q planbus.ScheduleName
	if err := strictJSON(doc, &q); err != nil {
		return nil, &request.Error{Msg: fmt.Sprintf(`want {"name": "..."}: %v`, err)}
	}
	if !wire.IsName(q.Name) {
		return nil, &request.Error{Field: "/name", Msg: fmt.Sprintf("schedule name %q: want 1 to 64 letters, digits, '_' or '-'", q.Name)}
	}
	return &q, nil
}

// DecodeSpec checks a schedule to add: its name, pattern, zone
// and request (as the request endpoint would).
func DecodeSpec(doc []byte) (*planbus.ScheduleSpec, error) {
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

// Add stores a new schedule of owner; its name must be free.
func (s *Store) Add(ctx context.Context, spec *planbus.ScheduleSpec, owner string, now time.Time) (*planbus.Schedule, error) {
	if old, _, err := s.Get(ctx, spec.Name); err != nil {
		return nil, err
	} else if old != nil {
		return nil, &Refusal{planbus.CodeInvalidRequest, "/name", fmt.Sprintf("a schedule %s exists (added %s); remove it first (planner schedule rm %s)",
			spec.Name, old.CreatedAt.UTC().Format(time.RFC3339), spec.Name)}
	}
	sc := &planbus.Schedule{ScheduleSpec: *spec, Owner: owner, CreatedAt: now.UTC()}
	// Expected last subject sequence 0: two planners adding one name at
	// once store one of them.
	if err := s.put(ctx, sc, jetstream.WithExpectLastSequencePerSubject(0)); err != nil {
		var ae *jetstream.APIError
		if errors.As(err, &ae) && (ae.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || ae.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return nil, &Refusal{planbus.CodeInvalidRequest, "/name", fmt.Sprintf("a schedule %s was just added", spec.Name)}
		}
		if errors.As(err, &ae) && ae.Code == 400 {
			return nil, &request.Error{Field: "/cron", Msg: fmt.Sprintf("the NATS server refuses the pattern %q: %s", spec.Cron, ae.Description)}
		}
		return nil, err
	}
	return sc, nil
}

// put writes sc: as a message schedule, or paused.
func (s *Store) put(ctx context.Context, sc *planbus.Schedule, opts ...jetstream.PublishOpt) error {
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
	_, err = s.js.PublishMsg(ctx, m, opts...)
	return err
}

// Get reads schedule name, running or paused; nil if there is
// none.
func (s *Store) Get(ctx context.Context, name string) (*planbus.Schedule, uint64, error) {
	ctx, cancel := storeOp(ctx)
	defer cancel()
	for _, subject := range []string{bus.ScheduleSubject(name), bus.SchedulePausedSubject(name)} {
		m, err := s.stream.GetLastMsgForSubject(ctx, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, 0, fmt.Errorf("schedule: schedule %s: %w", name, err)
		}
		var sc planbus.Schedule
		if err := json.Unmarshal(m.Data, &sc); err != nil {
			return nil, 0, fmt.Errorf("schedule: schedule %s: stored message %d: %w", name, m.Sequence, err)
		}
		return &sc, m.Sequence, nil
	}
	return nil, 0, nil
}

// Change removes (verb rm), pauses or resumes schedule name for caller.
func (s *Store) Change(ctx context.Context, name, verb, caller string) (*planbus.Schedule, error) {
	sc, _, err := s.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	if sc == nil {
		return nil, &Refusal{planbus.CodeNotFound, "/name", fmt.Sprintf("no schedule %s (planner schedule ls lists them)", name)}
	}
	if !mayUseSchedule(sc, caller) {
		return nil, &Forbidden{Name: name, Owner: sc.Owner}
	}
	purge := func(subject string) error {
		ctx, cancel := storeOp(ctx)
		defer cancel()
		return s.stream.Purge(ctx, jetstream.WithPurgeSubject(subject))
	}
	switch verb {
	case "rm":
		for _, subject := range []string{bus.ScheduleSubject(name), bus.SchedulePausedSubject(name), bus.ScheduleTickSubject(name)} {
			if err := purge(subject); err != nil {
				return nil, fmt.Errorf("schedule: remove schedule %s: %w", name, err)
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
		if err := s.put(ctx, sc); err != nil {
			return nil, fmt.Errorf("schedule: %s schedule %s: %w", verb, name, err)
		}
		old := bus.ScheduleSubject(name)
		if verb == "resume" {
			old = bus.SchedulePausedSubject(name)
		}
		if err := purge(old); err != nil {
			return nil, fmt.Errorf("schedule: %s schedule %s: %w", verb, name, err)
		}
	}
	return sc, nil
}

// mayUseSchedule: a schedule a named client added is that client's alone,
// as its requests are; one of the shared client role is everyone's.
func mayUseSchedule(sc *planbus.Schedule, caller string) bool {
	return sc.Owner == "" || sc.Owner == caller
}

// List lists the schedules the caller may see, with their last
// ticks.
func (s *Store) List(ctx context.Context, caller string) (*planbus.ScheduleList, error) {
	sctx, cancel := storeOp(ctx)
	defer cancel()
	info, err := s.stream.Info(sctx, jetstream.WithSubjectFilter(bus.SubjectSchedulesAll))
	if err != nil {
		return nil, fmt.Errorf("schedule: schedules: %w", err)
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
		sc, _, err := s.Get(ctx, name)
		if err != nil {
			return nil, err
		}
		if sc == nil || !mayUseSchedule(sc, caller) {
			continue
		}
		if n := ticks[name]; n > 0 {
			sc.Ticks = int(n)
			gctx, cancel := storeOp(ctx)
			m, err := s.stream.GetLastMsgForSubject(gctx, bus.ScheduleTickSubject(name))
			cancel()
			if err == nil {
				sc.LastTick, sc.LastRequestID = m.Time.UTC(), TickRequestID(name, m.Sequence)
			}
		}
		list.Schedules = append(list.Schedules, *sc)
	}
	return list, nil
}

// TickRequest is the request tick m submits: its schedule's, under the
// tick's request id (TickRequestID), and the schedule it is of.
func TickRequest(m jetstream.Msg) (doc []byte, id string, sc *planbus.Schedule, err error) {
	meta, err := m.Metadata()
	if err != nil {
		return nil, "", nil, err
	}
	name := strings.TrimPrefix(m.Subject(), "planbus.schedules.tick.")
	sc = &planbus.Schedule{}
	if err := json.Unmarshal(m.Data(), sc); err != nil || len(sc.Request) == 0 {
		return nil, "", nil, fmt.Errorf("tick %d of schedule %s is not a schedule (%v)", meta.Sequence.Stream, name, err)
	}
	id = TickRequestID(name, meta.Sequence.Stream)
	doc, err = withRequestID(sc.Request, id)
	if err != nil {
		return nil, "", nil, fmt.Errorf("schedule %s: its request: %w", name, err)
	}
	return doc, id, sc, nil
}

// TickRequestID is the request id of a schedule's tick: unique, as the
// tick's stream sequence is, and the same for every delivery of it.
func TickRequestID(name string, seq uint64) string {
	return name + "-" + strconv.FormatUint(seq, 10)
}

// withRequestID is request under id.
func withRequestID(req json.RawMessage, id string) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(req, &fields); err != nil {
		return nil, err
	}
	if fields == nil {
		return nil, errors.New("not a JSON object")
	}
	fields["requestId"], _ = json.Marshal(id)
	return json.Marshal(fields)
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
func (s *Store) tickTimes(ctx context.Context, name string) ([]time.Time, error) {
	ctx, cancel := storeOp(ctx)
	defer cancel()
	info, err := s.stream.Info(ctx)
	if err != nil {
		return nil, err
	}
	var times []time.Time
	seq := info.State.FirstSeq
	for range bus.ScheduleTicksKept * 2 {
		m, err := s.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(bus.ScheduleTickSubject(name)))
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

// Missed is the latest tick a schedule missed while the system was down,
// as the request to submit for it.
type Missed struct {
	Schedule *planbus.Schedule
	// ID is NAME-missed-<the tick's due time, Unix seconds>: every
	// planner that starts finds the same, accepted once.
	ID  string
	Doc []byte
	Due time.Time
}

// Missed finds, for each running schedule that catches up, the latest
// tick it missed (missedTick). A schedule whose ticks cannot be read is
// passed over, told to skipped.
func (s *Store) Missed(ctx context.Context, now time.Time, skipped func(name string, err error)) ([]Missed, error) {
	list, err := s.List(ctx, "")
	if err != nil {
		return nil, err
	}
	var out []Missed
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
			skipped(sc.Name, err)
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
		id := fmt.Sprintf("%s-missed-%d", sc.Name, due.Unix())
		doc, err := withRequestID(sc.Request, id)
		if err != nil {
			skipped(sc.Name, err)
			continue
		}
		out = append(out, Missed{Schedule: sc, ID: id, Doc: doc, Due: due})
	}
	return out, nil
}
