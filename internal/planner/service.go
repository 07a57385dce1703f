package planner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/session"
	"github.com/planbus/planbus/internal/skills"
)

// Config of a planner service.
type Config struct {
	// ID names this planner in logs and `nats micro info`.
	ID string
	// DomainsDir holds HTN domains, <name>.htn, for requests that name one.
	DomainsDir string
	// FallbackTemplates are the §5.3 texts; {input} is replaced by the
	// request's input. Default: the seed's three.
	FallbackTemplates []string
	// AckWait of the planner consumers: how soon another planner takes
	// over a dead one's requests. Default 30s.
	AckWait time.Duration
	// Version is reported by the micro service.
	Version string
}

// DefaultFallbackTemplates are seed 003 §5.3's.
var DefaultFallbackTemplates = []string{
	"The narrator pauses, considering your words: '{input}'",
	"Your action '{input}' echoes in the stillness...",
	"The story continues, though the path is unclear...",
}

func (c Config) withDefaults() Config {
	if c.ID == "" {
		host, _ := os.Hostname()
		c.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if len(c.FallbackTemplates) == 0 {
		c.FallbackTemplates = DefaultFallbackTemplates
	}
	if c.AckWait == 0 {
		c.AckWait = 30 * time.Second
	}
	if c.Version == "" {
		c.Version = "0.0.0-dev"
	}
	return c
}

// Service is the planner service. Create it with New and start it with Run.
type Service struct {
	cfg        Config
	conn       *bus.Conn
	log        zerolog.Logger
	requests   jetstream.KeyValue
	manifests  jetstream.KeyValue
	health     *skills.HealthBook
	states     *session.Store
	generators map[string]Generator
	locks      sync.Map // requestId -> *sync.Mutex
	work       sync.WaitGroup
	ready      chan struct{}
}

// New prepares a planner service on conn.
func New(conn *bus.Conn, cfg Config, log zerolog.Logger) (*Service, error) {
	cfg = cfg.withDefaults()
	s := &Service{cfg: cfg, conn: conn, log: log.With().Str("component", "planner").Str("planner", cfg.ID).Logger(),
		ready: make(chan struct{})}
	s.generators = map[string]Generator{
		KindPlan:     fixedPlan{},
		KindExternal: external{nc: conn.NC},
		KindHTN:      htnPlanner{domains: cfg.DomainsDir},
	}
	return s, nil
}

// Ready is closed once the service takes requests.
func (s *Service) Ready() <-chan struct{} { return s.ready }

// Run serves until ctx ends, then finishes the work in hand.
func (s *Service) Run(ctx context.Context) error {
	var err error
	if s.requests, err = s.conn.JS.KeyValue(ctx, bus.BucketRequests); err != nil {
		return fmt.Errorf("planner: requests bucket: %w", err)
	}
	if s.manifests, err = s.conn.JS.KeyValue(ctx, bus.BucketSkills); err != nil {
		return fmt.Errorf("planner: skills bucket: %w", err)
	}
	if s.health, err = skills.OpenHealthBook(ctx, s.conn.JS); err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	defer s.health.Close()
	if s.states, err = session.Open(ctx, s.conn.JS); err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	var consuming []jetstream.ConsumeContext
	defer func() {
		for _, cc := range consuming {
			cc.Stop()
			<-cc.Closed()
		}
		s.work.Wait()
	}()
	for _, src := range []struct {
		stream, durable, filter string
		handle                  func(jetstream.Msg)
	}{
		{bus.StreamRequests, bus.ConsumerPlannerRequests, bus.SubjectRequestsAll, s.onRequest},
		{bus.StreamExecutions, bus.ConsumerPlannerExecutions, bus.SubjectExecutionsAll, s.onExecution},
	} {
		cons, err := s.conn.JS.CreateOrUpdateConsumer(ctx, src.stream, jetstream.ConsumerConfig{
			Durable: src.durable, Description: "planbus: shared by every planner", FilterSubject: src.filter,
			AckPolicy: jetstream.AckExplicitPolicy, AckWait: s.cfg.AckWait, MaxDeliver: -1, MaxAckPending: 10000,
		})
		if err != nil {
			return fmt.Errorf("planner: consumer %s: %w", src.durable, err)
		}
		handle := src.handle
		cc, err := cons.Consume(func(m jetstream.Msg) {
			s.work.Add(1)
			go func() {
				defer s.work.Done()
				defer func() {
					if r := recover(); r != nil {
						s.log.Error().Str("panic", fmt.Sprint(r)).Str("stack", string(debug.Stack())).Msg("planner bug; the message will be redelivered")
						_ = m.NakWithDelay(5 * time.Second)
					}
				}()
				handle(m)
			}()
		}, jetstream.PullMaxMessages(256))
		if err != nil {
			return fmt.Errorf("planner: consume %s: %w", src.durable, err)
		}
		consuming = append(consuming, cc)
	}
	svc, err := s.addService()
	if err != nil {
		return err
	}
	defer func() { _ = svc.Stop() }()
	// The server must know the endpoint's subscriptions before anyone is
	// told the planner is ready.
	if err := s.conn.NC.FlushTimeout(10 * time.Second); err != nil {
		return fmt.Errorf("planner: flush: %w", err)
	}
	s.log.Info().Str("domains", s.cfg.DomainsDir).Msg("planner running")
	close(s.ready)
	<-ctx.Done()
	return nil
}

func (s *Service) lock(requestID string) func() {
	m, _ := s.locks.LoadOrStore(requestID, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// loop is a request's replan loop state, stored under its id in
// planbus-requests.
type loop struct {
	Request  *Request              `json:"request"`
	Status   string                `json:"status"` // generating, executing, done
	Attempt  int                   `json:"attempt"`
	PlanID   string                `json:"planId,omitempty"`
	Plan     json.RawMessage       `json:"plan,omitempty"` // the plan being executed, to publish again after a crash
	Disabled []string              `json:"disabledSkills"`
	History  []Attempt             `json:"history"`
	Last     *plan.ExecutionResult `json:"lastExecution,omitempty"`
	Outcome  *Outcome              `json:"outcome,omitempty"`
	Updated  time.Time             `json:"updatedAt"`
}

const (
	loopGenerating = "generating"
	loopExecuting  = "executing"
	loopDone       = "done"
)

func (s *Service) load(ctx context.Context, requestID string) (*loop, uint64, error) {
	e, err := s.requests.Get(ctx, requestID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var l loop
	if err := json.Unmarshal(e.Value(), &l); err != nil {
		return nil, 0, fmt.Errorf("loop state of %s: %w", requestID, err)
	}
	return &l, e.Revision(), nil
}

// save stores the loop with compare-and-set; only the holder of the
// request's lock writes, and the lock is per process, so a conflict means
// another planner works on the request: the caller leaves it to that one.
func (s *Service) save(ctx context.Context, l *loop, rev uint64) (uint64, error) {
	l.Updated = time.Now().UTC()
	data, err := json.Marshal(l)
	if err != nil {
		return 0, err
	}
	if rev == 0 {
		return s.requests.Create(ctx, l.Request.RequestID, data)
	}
	return s.requests.Update(ctx, l.Request.RequestID, data, rev)
}

// onRequest starts (or resumes) the loop of an accepted request.
func (s *Service) onRequest(m jetstream.Msg) {
	r, err := DecodeRequest(m.Data())
	if err != nil || r.RequestID == "" {
		s.log.Error().Err(err).Str("subject", m.Subject()).Msg("dropping an invalid request")
		_ = m.TermWithReason("invalid request")
		return
	}
	defer s.lock(r.RequestID)()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, rev, err := s.load(ctx, r.RequestID)
	if err == nil && l == nil {
		l = &loop{Request: r, Status: loopGenerating, Disabled: []string{}, History: []Attempt{}}
		rev, err = s.save(ctx, l, 0)
		if errors.Is(err, jetstream.ErrKeyExists) {
			l, rev, err = s.load(ctx, r.RequestID)
		}
	}
	if err != nil {
		s.log.Error().Err(err).Str("request_id", r.RequestID).Msg("cannot load the request's loop; it will be redelivered")
		_ = m.NakWithDelay(time.Second)
		return
	}
	if err := s.advance(ctx, l, rev); err != nil {
		s.log.Error().Err(err).Str("request_id", r.RequestID).Msg("loop step failed; the request will be redelivered")
		_ = m.NakWithDelay(time.Second)
		return
	}
	_ = m.Ack()
}

// onExecution moves a loop on when its plan ends.
func (s *Service) onExecution(m jetstream.Msg) {
	var res plan.ExecutionResult
	if err := json.Unmarshal(m.Data(), &res); err != nil || res.RequestID == "" {
		_ = m.TermWithReason("invalid execution result")
		return
	}
	defer s.lock(res.RequestID)()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, rev, err := s.load(ctx, res.RequestID)
	if err != nil {
		_ = m.NakWithDelay(time.Second)
		return
	}
	if l == nil {
		_ = m.Ack() // a plan submitted directly, not through a request
		return
	}
	if l.Status == loopExecuting && l.PlanID == res.PlanID {
		s.record(l, &res)
	}
	if err := s.advance(ctx, l, rev); err != nil {
		s.log.Error().Err(err).Str("request_id", res.RequestID).Msg("loop step failed; the result will be redelivered")
		_ = m.NakWithDelay(time.Second)
		return
	}
	_ = m.Ack()
}

// record notes an execution's end in the loop: success ends it; a failure
// that can be replanned goes back to generating with the failed skills, and
// the skills health has disabled, added to disabledSkills (§5.2).
func (s *Service) record(l *loop, res *plan.ExecutionResult) {
	l.Last = res
	a := Attempt{Attempt: l.Attempt, PlanID: res.PlanID, State: res.State, Error: res.Error, FailedSkills: res.FailedSkills}
	switch {
	case res.Success:
		l.History = append(l.History, a)
		s.finish(l, StatusSucceeded, nil)
	case res.CanReplan && l.Attempt < l.Request.MaxAttempts:
		grown := slices.Clone(l.Disabled)
		for _, sk := range append(slices.Clone(res.FailedSkills), s.health.Disabled(l.Request.SessionID)...) {
			if !slices.Contains(grown, sk) {
				grown = append(grown, sk)
			}
		}
		slices.Sort(grown)
		a.DisabledSkills = grown
		l.History = append(l.History, a)
		l.Disabled, l.Status, l.Plan = grown, loopGenerating, nil
		s.event(l, plan.Event{Type: "request.replanning", PlanID: res.PlanID, Attempt: l.Attempt,
			Message: fmt.Sprintf("attempt %d %s; generating attempt %d with disabled skills %v", l.Attempt, res.State, l.Attempt+1, grown)})
	case res.CanReplan:
		l.History = append(l.History, a)
		s.finish(l, StatusFallback, res.Error)
	default:
		l.History = append(l.History, a)
		s.finish(l, StatusFailed, res.Error)
	}
}

// advance carries the loop forward from its stored state and performs what
// the state implies: generate while generating, (re)publish the plan being
// executed, (re)publish the outcome of a finished request. Every change is
// stored before it is acted on.
func (s *Service) advance(ctx context.Context, l *loop, rev uint64) error {
	for {
		switch l.Status {
		case loopDone:
			if _, err := s.save(ctx, l, rev); err != nil {
				return err
			}
			return s.publishOutcome(ctx, l.Outcome)
		case loopExecuting:
			if _, err := s.save(ctx, l, rev); err != nil {
				return err
			}
			_, err := s.conn.JS.Publish(ctx, bus.PlanSubject(l.PlanID), l.Plan, jetstream.WithMsgID(l.PlanID))
			return err
		}
		if l.Attempt >= l.Request.MaxAttempts {
			last := (*plan.ErrorInfo)(nil)
			if n := len(l.History); n > 0 {
				last = l.History[n-1].Error
			}
			s.finish(l, StatusFallback, last)
			continue
		}
		l.Attempt++
		s.event(l, plan.Event{Type: "request.generating", Attempt: l.Attempt,
			Message: fmt.Sprintf("generating attempt %d of %d (%s)", l.Attempt, l.Request.MaxAttempts, l.Request.Kind)})
		p, err := s.generate(ctx, l)
		if err != nil {
			ge := genErrorOf(err)
			l.History = append(l.History, Attempt{Attempt: l.Attempt, State: "generation_failed", Error: ge.info(), DisabledSkills: slices.Clone(l.Disabled)})
			s.log.Warn().Str("request_id", l.Request.RequestID).Int("attempt", l.Attempt).Err(err).Msg("generation failed")
			if !ge.retryable() {
				s.finish(l, StatusFallback, ge.info())
			}
			continue
		}
		data, _ := json.Marshal(p)
		l.Status, l.PlanID, l.Plan = loopExecuting, p.PlanID, data
		s.event(l, plan.Event{Type: "request.generated", PlanID: p.PlanID, Attempt: l.Attempt,
			Message: fmt.Sprintf("attempt %d: plan %s with %d tool(s)", l.Attempt, p.PlanID, len(p.Tools))})
	}
}

func (s *Service) generate(ctx context.Context, l *loop) (*plan.Plan, error) {
	r := l.Request
	g, ok := s.generators[r.Kind]
	if !ok {
		return nil, &GenError{Code: "UNSUPPORTED_KIND", Category: plan.CategoryInvalidInput, Message: fmt.Sprintf("kind %q is not available", r.Kind)}
	}
	in := GenInput{Request: r, Attempt: l.Attempt, DisabledSkills: slices.Clone(l.Disabled), LastExecution: l.Last}
	if n := len(l.History); n > 0 {
		in.ParentPlanID = l.History[n-1].PlanID
	}
	var err error
	if in.Session, err = s.states.Get(ctx, r.SessionID); err != nil {
		return nil, &GenError{Code: "SESSION_UNAVAILABLE", Category: plan.CategoryTransient, Message: err.Error()}
	}
	if in.Skills, err = s.skillManifests(ctx); err != nil {
		return nil, &GenError{Code: "SKILLS_UNAVAILABLE", Category: plan.CategoryTransient, Message: err.Error()}
	}
	in.Health = map[string]string{}
	for name := range in.Skills {
		h := s.health.Get(r.SessionID, name)
		in.Health[name] = h.State
		if !h.Usable() && !slices.Contains(in.DisabledSkills, name) {
			in.DisabledSkills = append(in.DisabledSkills, name)
		}
	}
	gctx, cancel := context.WithTimeout(ctx, GenerationTimeout)
	defer cancel()
	p, err := g.Generate(gctx, in)
	if err != nil {
		return nil, err
	}
	return s.finishPlan(p, l, in)
}

// finishPlan gives a generated plan its ids and metadata and checks it.
func (s *Service) finishPlan(p *plan.Plan, l *loop, in GenInput) (*plan.Plan, error) {
	r := l.Request
	p.PlanID = fmt.Sprintf("%s-%d", r.RequestID, l.Attempt)
	p.RequestID, p.SessionID = r.RequestID, r.SessionID
	if d := r.PlanDefaults; d != nil {
		if d.MaxConcurrency > 0 && p.MaxConcurrency == 0 {
			p.MaxConcurrency = d.MaxConcurrency
		}
		if d.TimeoutMs > 0 {
			p.TimeoutMs = d.TimeoutMs
		}
	}
	meta := map[string]any{}
	if len(p.Metadata) > 0 {
		_ = json.Unmarshal(p.Metadata, &meta)
	}
	meta["generationAttempt"] = l.Attempt
	meta["parentPlanId"] = in.ParentPlanID
	meta["generator"] = r.Kind
	meta["disabledSkills"] = in.DisabledSkills
	p.Metadata, _ = json.Marshal(meta)
	for _, t := range p.Tools {
		if slices.Contains(in.DisabledSkills, t.Skill) {
			return nil, &GenError{Code: "SKILL_DISABLED", Category: plan.CategoryTransient,
				Message: fmt.Sprintf("the %s planner used disabled skill %q (tool %q)", r.Kind, t.Skill, t.ToolID)}
		}
		if _, ok := in.Skills[t.Skill]; !ok {
			return nil, &GenError{Code: plan.CodeUnknownSkill, Category: plan.CategoryTransient,
				Message: fmt.Sprintf("tool %q uses unknown skill %q", t.ToolID, t.Skill)}
		}
	}
	data, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	checked, err := plan.Decode(data)
	if err != nil {
		return nil, &GenError{Code: plan.CodeInvalidPlan, Category: plan.CategoryTransient, Message: err.Error()}
	}
	return checked, nil
}

func (s *Service) skillManifests(ctx context.Context) (map[string]skills.Manifest, error) {
	lister, err := s.manifests.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]skills.Manifest{}
	for k := range lister.Keys() {
		e, err := s.manifests.Get(ctx, k)
		if err != nil {
			continue
		}
		var m skills.Manifest
		if json.Unmarshal(e.Value(), &m) == nil {
			out[k] = m
		}
	}
	return out, nil
}

// finish ends the loop with an outcome; advance stores and publishes it.
func (s *Service) finish(l *loop, status string, errInfo *plan.ErrorInfo) {
	r := l.Request
	o := &Outcome{RequestID: r.RequestID, SessionID: r.SessionID, Status: status, Success: status == StatusSucceeded,
		Fallback: status == StatusFallback, Attempts: len(l.History), PlanID: l.PlanID, DisabledSkills: l.Disabled,
		Error: errInfo, History: l.History, Execution: l.Last, FinishedAt: time.Now().UTC()}
	if o.Fallback {
		o.Narrative = s.narrate(r)
		o.Tools = []json.RawMessage{}
	}
	l.Status, l.Outcome, l.Plan = loopDone, o, nil
	s.event(l, plan.Event{Type: "request." + status, PlanID: l.PlanID, Attempts: o.Attempts, Error: errInfo,
		Message: fmt.Sprintf("%s after %d attempt(s)", status, o.Attempts)})
}

// narrate fills a fallback template (§5.3), chosen by the request id so
// the same request always gets the same text.
func (s *Service) narrate(r *Request) string {
	input := strings.TrimSpace(string(r.Input))
	var str string
	if json.Unmarshal(r.Input, &str) == nil {
		input = str
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(r.RequestID))
	t := s.cfg.FallbackTemplates[h.Sum32()%uint32(len(s.cfg.FallbackTemplates))]
	return strings.ReplaceAll(t, "{input}", input)
}

func (s *Service) publishOutcome(ctx context.Context, o *Outcome) error {
	data, err := json.Marshal(o)
	if err != nil {
		return err
	}
	_, err = s.conn.JS.Publish(ctx, bus.OutcomeSubject(o.RequestID), data, jetstream.WithMsgID("outcome-"+o.RequestID))
	return err
}

func (s *Service) event(l *loop, ev plan.Event) {
	ev.Time, ev.RequestID, ev.SessionID = time.Now(), l.Request.RequestID, l.Request.SessionID
	data, err := json.Marshal(ev)
	if err != nil {
		return
	}
	_ = s.conn.NC.Publish(bus.EventSubject(ev.RequestID, ev.Type), data)
}

// accept validates a request as the endpoint receives it and queues it.
func (s *Service) accept(ctx context.Context, doc []byte) (*Request, error) {
	r, err := DecodeRequest(doc)
	if err != nil {
		return nil, err
	}
	if r.RequestID == "" {
		r.RequestID = nuid.Next()
	}
	switch r.Kind {
	case KindGOAP, KindTemplate:
		return nil, &RequestError{Field: "/kind", Msg: fmt.Sprintf("kind %q is not available yet; use plan, external or htn", r.Kind)}
	case KindPlan:
		p, err := plan.Decode(r.Plan)
		if err != nil {
			return nil, &RequestError{Field: "/plan", Msg: err.Error()}
		}
		known, err := s.skillManifests(ctx)
		if err != nil {
			return nil, err
		}
		for i, t := range p.Tools {
			if _, ok := known[t.Skill]; !ok {
				return nil, &RequestError{Field: fmt.Sprintf("/plan/tools/%d/skill", i),
					Msg: fmt.Sprintf("unknown skill %q: no worker has advertised it", t.Skill)}
			}
		}
	case KindHTN:
		if _, err := (htnPlanner{domains: s.cfg.DomainsDir}).program(r.HTN, nil); err != nil {
			var re *RequestError
			if errors.As(err, &re) {
				return nil, re
			}
			return nil, &RequestError{Field: "/htn", Msg: err.Error()}
		}
	}
	data, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	if _, err := s.conn.JS.Publish(ctx, bus.RequestSubject(r.RequestID), data, jetstream.WithMsgID(r.RequestID)); err != nil {
		return nil, fmt.Errorf("planner: queue request: %w", err)
	}
	return r, nil
}

// Accepted is the reply to an accepted request.
type Accepted struct {
	RequestID string `json:"requestId"`
	SessionID string `json:"sessionId"`
	Status    string `json:"status"`
}

// Rejected is the reply to a request that is not valid.
type Rejected struct {
	Status string     `json:"status"`
	Error  ReplyError `json:"error"`
}

// ReplyError names the problem.
type ReplyError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

func (s *Service) addService() (micro.Service, error) {
	svc, err := micro.AddService(s.conn.NC, micro.Config{
		Name: bus.ServicePlanner, Version: s.cfg.Version,
		Description: "planbus planner: plan requests in, plans out, replans on failure",
		Metadata:    map[string]string{"planner": s.cfg.ID},
	})
	if err != nil {
		return nil, fmt.Errorf("planner: micro service: %w", err)
	}
	add := func(name, subject string, h micro.HandlerFunc) error {
		return svc.AddEndpoint(name, h, micro.WithEndpointSubject(subject))
	}
	if err := add("request", bus.SubjectPlanRequest, s.handleRequest); err != nil {
		return nil, err
	}
	if err := add("reset", bus.SubjectSessionReset, s.handleReset); err != nil {
		return nil, err
	}
	if err := add("skills", bus.SubjectSkills, s.handleSkills); err != nil {
		return nil, err
	}
	return svc, nil
}

func (s *Service) handleRequest(req micro.Request) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := s.accept(ctx, req.Data())
	if err != nil {
		rej := Rejected{Status: "rejected", Error: ReplyError{Code: "INVALID_REQUEST", Message: err.Error()}}
		var re *RequestError
		if errors.As(err, &re) {
			rej.Error.Field, rej.Error.Message = re.Field, re.Error()
		} else {
			rej.Error.Code = "UNAVAILABLE"
		}
		data, _ := json.Marshal(rej)
		_ = req.Error("400", rej.Error.Message, data)
		return
	}
	s.event(&loop{Request: r}, plan.Event{Type: "request.accepted", Message: "kind " + r.Kind})
	_ = req.RespondJSON(Accepted{RequestID: r.RequestID, SessionID: r.SessionID, Status: "accepted"})
}

// handleReset restarts a session (the §3.1 "session restart" edge): every
// skill back to healthy; with "state": true the session's state is
// cleared too.
func (s *Service) handleReset(req micro.Request) {
	var q struct {
		SessionID string `json:"sessionId"`
		State     bool   `json:"state"`
	}
	if err := json.Unmarshal(req.Data(), &q); err != nil || !plan.ValidID(q.SessionID) {
		_ = req.Error("400", `want {"sessionId": "...", "state": false}`, nil)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	healed, err := s.health.Reset(ctx, q.SessionID)
	if err == nil && q.State {
		err = s.states.Delete(ctx, q.SessionID)
	}
	if err != nil {
		_ = req.Error("500", err.Error(), nil)
		return
	}
	if healed == nil {
		healed = []string{}
	}
	_ = req.RespondJSON(map[string]any{"sessionId": q.SessionID, "healed": healed, "stateCleared": q.State})
}

// handleSkills lists advertised skills with their health in a session.
func (s *Service) handleSkills(req micro.Request) {
	var q struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(req.Data(), &q)
	if q.SessionID == "" {
		q.SessionID = "default"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ms, err := s.skillManifests(ctx)
	if err != nil {
		_ = req.Error("500", err.Error(), nil)
		return
	}
	var out []map[string]any
	for _, name := range sortedKeys(ms) {
		out = append(out, map[string]any{"manifest": ms[name], "health": s.health.Get(q.SessionID, name)})
	}
	_ = req.RespondJSON(map[string]any{"sessionId": q.SessionID, "skills": out})
}
