package planner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/planbus/planbus/internal/agent"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/generator"
	"github.com/planbus/planbus/internal/guide"
	"github.com/planbus/planbus/internal/health"
	"github.com/planbus/planbus/internal/llm"
	"github.com/planbus/planbus/internal/metrics"
	"github.com/planbus/planbus/internal/request"
	"github.com/planbus/planbus/internal/schedule"
	"github.com/planbus/planbus/internal/session"
	"github.com/planbus/planbus/internal/telemetry"
	"github.com/planbus/planbus/internal/templates"
)

// Config of a planner service.
type Config struct {
	// ID names this planner in logs and `nats micro info`.
	ID string
	// DomainsDir holds HTN domains (<name>.htn) and GOAP domains
	// (<name>.goap.json) for requests that name one.
	DomainsDir string
	// Templates is the plan template library of kind template requests.
	Templates *templates.Library
	// LLM is the language model of kind llm requests: none when its URL
	// is empty.
	LLM LLMConfig
	// FallbackTemplates are the texts of fallback outcomes, one chosen per
	// request; {input} is replaced by the request's input. Default:
	// DefaultFallbackTemplates.
	FallbackTemplates []string
	// AckWait of the planner consumers: how soon another planner takes
	// over a dead one's requests. Default 30s.
	AckWait time.Duration
	// Version is reported by the micro service.
	Version string
	// ExternalPrefix, when set, is where external planners must answer: a
	// request of kind external naming a subject outside it is refused at
	// the endpoint. Set with authorization on, where the planner may
	// publish under "planners." only.
	ExternalPrefix string

	// HTNMaxMemory is the most memory, in bytes, one HTN generation may
	// hold (the planner's estimate, htn.Budget.Memory); a request may ask
	// for less in htn.budget.memory. Default DefaultHTNMaxMemory (128 MiB).
	HTNMaxMemory int64
	// GOAPMaxMemory and GOAPMaxNodes bound one GOAP generation (bytes held,
	// states expanded); a request may ask for less in goap.budget.
	// Defaults DefaultGOAPMaxMemory (128 MiB) and goap.DefaultMaxNodes.
	GOAPMaxMemory int64
	GOAPMaxNodes  int
	// GenMaxMemory is the node's budget for all generations running at
	// once: each reserves its memory budget before it starts and waits
	// while the reservations would exceed this. Default
	// DefaultGenMaxMemory (256 MiB); at least HTNMaxMemory and
	// GOAPMaxMemory.
	GenMaxMemory int64
	// GenConcurrency is how many HTN and GOAP searches run in this
	// process at once, and how many generations that do not search (a
	// plan as given, a template filled in), in a line of their own, so
	// that they never wait behind searches; external planners are not
	// counted (their work is elsewhere). The others wait in line.
	// Default: the CPU count.
	GenConcurrency int
	// DeliveryLimit is how many deliveries of a request or an execution
	// result the planner tries before it gives up on it: the request then
	// ends with a failed outcome (code DELIVERY_LIMIT), an execution result
	// of no request is dropped, logged and counted. Default
	// bus.DefaultDeliveryLimit (10); the consumers allow a few more for
	// that last step (bus.ConsumerMaxDeliver).
	DeliveryLimit int
	// Tracer records the planner's spans (planbus.accept, planbus.request,
	// planbus.resume, planbus.generate). Default: the global
	// TracerProvider, a no-op unless the process set one up
	// (export.Setup).
	Tracer trace.TracerProvider
	// Metrics, when set, is the process's registry: the planner counts
	// requests, generations by kind and outcome, replans, conflicts and
	// dropped messages there. Default: no metrics.
	Metrics *metrics.Registry
}

// DefaultFallbackTemplates are the three fallback texts a planner uses
// when it is given none.
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
	if c.HTNMaxMemory == 0 {
		c.HTNMaxMemory = generator.DefaultHTNMaxMemory
	}
	if c.GOAPMaxMemory == 0 {
		c.GOAPMaxMemory = generator.DefaultGOAPMaxMemory
	}
	if c.GOAPMaxNodes == 0 {
		c.GOAPMaxNodes = generator.DefaultGOAPMaxNodes
	}
	if c.GenMaxMemory == 0 {
		c.GenMaxMemory = generator.DefaultGenMaxMemory
	}
	if c.GenConcurrency == 0 {
		c.GenConcurrency = runtime.NumCPU()
	}
	if c.DeliveryLimit == 0 {
		c.DeliveryLimit = bus.DefaultDeliveryLimit
	}
	return c
}

// ErrInvalidConfig is matched by every error Config.validate returns.
var ErrInvalidConfig = errors.New("planner: invalid config")

// validate names the first field out of bounds.
func (c Config) validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
	}
	switch {
	case c.HTNMaxMemory < 1<<20:
		return bad("HTNMaxMemory", "%d bytes, want at least 1 MiB", c.HTNMaxMemory)
	case c.GOAPMaxMemory < 1<<20:
		return bad("GOAPMaxMemory", "%d bytes, want at least 1 MiB", c.GOAPMaxMemory)
	case c.GOAPMaxNodes < 1:
		return bad("GOAPMaxNodes", "%d, want at least 1", c.GOAPMaxNodes)
	case c.GenMaxMemory < max(c.HTNMaxMemory, c.GOAPMaxMemory):
		return bad("GenMaxMemory", "%d bytes, want at least HTNMaxMemory (%d) and GOAPMaxMemory (%d): a generation must fit",
			c.GenMaxMemory, c.HTNMaxMemory, c.GOAPMaxMemory)
	case c.GenConcurrency < 1:
		return bad("GenConcurrency", "%d, want at least 1", c.GenConcurrency)
	case c.DeliveryLimit < 1:
		return bad("DeliveryLimit", "%d, want at least 1", c.DeliveryLimit)
	}
	return nil
}

// Service is the planner service. Create it with New and start it with Run.
type Service struct {
	cfg  Config
	conn *bus.Conn
	log  zerolog.Logger
	goap generator.GOAP // kind goap, its domains decoded once
	// inputSchemas are the skills' input schemas compiled, for the
	// literal inputs of plans submitted (checkToolInput).
	inputSchemas inputSchemas
	requests     jetstream.KeyValue
	plans        jetstream.KeyValue // read only: which request a plan is of, and whether it runs
	accepted     jetstream.Stream   // PLANBUS_REQUESTS, read by subject and sequence
	schedules    *schedule.Store    // PLANBUS_SCHEDULES (schedules.go)
	outcomes     jetstream.Stream   // PLANBUS_OUTCOMES, read by subject: is an id taken
	manifests    jetstream.KeyValue
	guide        *guide.Service // guided sessions (internal/guide)
	health       *health.Book
	states       *session.Store
	generators   map[string]generator.Generator
	gate         *generator.Gate // HTN and GOAP searches of requests
	quick        *generator.Gate // generations that do not search: plans as given, templates
	agentGate    *generator.Gate // the searches of agents: slots of their own, the searches' memory
	stats        counters
	metrics      *metrics.Planner
	stopping     context.Context // Run's context: every handler's derives from it
	locks        keyedLocks      // a request's (an agent's) messages are handled one at a time
	gensMu       sync.Mutex
	gens         map[string]context.CancelCauseFunc // generations running in this process, by request id
	work         sync.WaitGroup
	ready        chan struct{}
	agents       *agent.Service // GOAP agents (agents.go)
	tracer       trace.Tracer
}

// LLMConfig is the OpenAI-compatible Chat Completions endpoint kind llm
// requests are planned with (generator.LLM).
type LLMConfig struct {
	// URL is the API's base URL (http://127.0.0.1:11434/v1 for Ollama).
	URL string
	// Model is asked when a request names none.
	Model string
	// APIKey is sent as a bearer token (PLANBUS_LLM_API_KEY); empty: none.
	APIKey string
	// Budget bounds one generation, repair included. Default 5s
	// (generator.DefaultLLMBudget).
	Budget time.Duration
}

// New prepares a planner service on conn.
func New(conn *bus.Conn, cfg Config, log zerolog.Logger) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	searches := generator.NewGate(cfg.GenConcurrency, cfg.GenMaxMemory)
	s := &Service{cfg: cfg, conn: conn, log: log.With().Str("component", "planner").Str("planner", cfg.ID).Logger(),
		ready: make(chan struct{}), gate: searches, quick: generator.NewGate(cfg.GenConcurrency, cfg.GenMaxMemory),
		agentGate: searches.Sharing(generator.AgentSlots(cfg.GenConcurrency)),
		stopping:  context.Background(),
		gens:      map[string]context.CancelCauseFunc{}, metrics: cfg.Metrics.Planner()}
	s.tracer = telemetry.Tracer(cfg.Tracer)
	s.goap = generator.NewGOAP(cfg.DomainsDir)
	s.generators = map[string]generator.Generator{
		request.KindPlan:     generator.Fixed{},
		request.KindExternal: generator.External{NC: conn.NC},
		request.KindHTN:      generator.HTN{Domains: cfg.DomainsDir},
		request.KindGOAP:     s.goap,
		request.KindTemplate: generator.Template{Library: cfg.Templates},
		request.KindLLM:      generator.LLM{Endpoint: llm.Endpoint{URL: cfg.LLM.URL, Model: cfg.LLM.Model, APIKey: cfg.LLM.APIKey}},
	}
	s.guide = guide.New(conn, guide.Config{Templates: cfg.Templates, Tracer: s.tracer, Claim: s.claimSession, Reject: rejectErr}, s.log)
	s.agents = agent.New(conn, agentHost{s}, agent.Config{ID: cfg.ID, Domains: s.goap, Tracer: s.tracer}, s.log)
	return s, nil
}

// Ready is closed once the service takes requests.
func (s *Service) Ready() <-chan struct{} { return s.ready }

// GenerationMemory is the memory budgets of the generations running now,
// in bytes: at most Config.GenMaxMemory.
func (s *Service) GenerationMemory() int64 { return s.gate.Reserved() }

// Run serves until ctx ends, then returns once the messages in hand are
// handled or handed back. Every handler works within ctx, so a handler
// busy with a generation or a slow store stops with it: its message comes
// back to another planner, or to this one when it runs again.
func (s *Service) Run(ctx context.Context) error {
	s.stopping = ctx
	if err := s.open(ctx); err != nil {
		return err
	}
	var err error
	if s.health, err = health.Open(ctx, s.conn.JS); err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	defer s.health.Close()
	if s.states, err = session.Open(ctx, s.conn.JS); err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	if err := s.agents.Open(ctx); err != nil {
		return err
	}
	var consuming []jetstream.ConsumeContext
	defer func() {
		for _, cc := range consuming {
			cc.Stop()
			<-cc.Closed()
		}
		s.work.Wait()
	}()
	// MaxAckPending bounds the messages the planners hold at once (each
	// holds its request while it waits for a generation slot).
	for _, src := range []struct {
		stream, durable, filter string
		maxAck                  int
		handle                  handler
		deliver                 jetstream.DeliverPolicy
	}{
		{bus.StreamRequests, bus.ConsumerPlannerRequests, bus.SubjectRequestsAll, 256, handler{s.onRequest, s.abandonRequest}, jetstream.DeliverAllPolicy},
		{bus.StreamExecutions, bus.ConsumerPlannerExecutions, bus.SubjectExecutionsAll, 1024, handler{s.onExecution, s.abandonExecution}, jetstream.DeliverAllPolicy},
		{bus.StreamAgents, bus.ConsumerPlannerAgents, bus.SubjectAgentsAll, 256, handler{s.agents.OnWake, s.agents.Abandon}, jetstream.DeliverAllPolicy},
		// Changes of session states from the consumer's creation on: what
		// agents perceive (internal/agent).
		{bus.SessionsStream, bus.ConsumerPlannerSessions, bus.SessionChanges, 1024, handler{s.agents.OnSessionChange, s.agents.Abandon}, jetstream.DeliverNewPolicy},
		// Schedules' ticks (schedules.go), each submitted once.
		{bus.StreamSchedules, bus.ConsumerPlannerSchedules, bus.SubjectScheduleTicks, 64, handler{s.onTick, s.abandonTick}, jetstream.DeliverAllPolicy},
	} {
		h := src.handle
		cc, err := s.conn.ConsumeShared(ctx, bus.Shared{Stream: src.stream, Durable: src.durable, Filter: src.filter,
			Description: "planbus: shared by every planner", Deliver: src.deliver, AckWait: s.cfg.AckWait,
			DeliveryLimit: s.cfg.DeliveryLimit, MaxAckPending: src.maxAck, Batch: 256},
			func(m jetstream.Msg) {
				s.work.Add(1)
				go func() {
					defer s.work.Done()
					s.handle(m, h)
				}()
			}, nil)
		if err != nil {
			return fmt.Errorf("planner: %w", err)
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
	s.work.Add(1)
	go func() {
		defer s.work.Done()
		cctx, cancel := context.WithTimeout(ctx, handleTimeout)
		defer cancel()
		s.catchUp(cctx, time.Now())
	}()
	<-ctx.Done()
	return nil
}

// open binds the buckets and streams the service reads and writes.
func (s *Service) open(ctx context.Context) error {
	var err error
	if s.requests, err = s.conn.JS.KeyValue(ctx, bus.BucketRequests); err != nil {
		return fmt.Errorf("planner: requests bucket: %w", err)
	}
	if s.plans, err = s.conn.JS.KeyValue(ctx, bus.BucketPlans); err != nil {
		return fmt.Errorf("planner: plans bucket: %w", err)
	}
	if s.outcomes, err = s.conn.JS.Stream(ctx, bus.StreamOutcomes); err != nil {
		return fmt.Errorf("planner: outcomes stream: %w", err)
	}
	if s.accepted, err = s.conn.JS.Stream(ctx, bus.StreamRequests); err != nil {
		return fmt.Errorf("planner: requests stream: %w", err)
	}
	if s.schedules, err = schedule.Open(ctx, s.conn.JS); err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	if s.manifests, err = s.conn.JS.KeyValue(ctx, bus.BucketSkills); err != nil {
		return fmt.Errorf("planner: skills bucket: %w", err)
	}
	if err := s.guide.Open(ctx); err != nil {
		return err
	}
	return nil
}

// counters are the planner's stats since it started.
type counters struct {
	// Dropped counts messages given up after their delivery limit, or
	// undecodable: each is logged.
	Dropped atomic.Int64
	// TooLarge counts requests whose loop state could not be stored.
	TooLarge atomic.Int64
}

// Stats are the planner's counters: generations running, waiting for a
// slot or memory, and done; messages dropped.
func (s *Service) Stats() map[string]int64 {
	return map[string]int64{
		"generationsRunning":      s.gate.Running() + s.quick.Running() + s.agentGate.Running(),
		"generationsWaiting":      s.gate.Waiting() + s.quick.Waiting() + s.agentGate.Waiting(),
		"generations":             s.gate.Served() + s.quick.Served() + s.agentGate.Served(),
		"agentGenerationsRunning": s.agentGate.Running(), "agentGenerationsWaiting": s.agentGate.Waiting(),
		"agentGenerations": s.agentGate.Served(), "messagesDropped": s.stats.Dropped.Load(),
		"requestsTooLarge": s.stats.TooLarge.Load(),
	}
}

// handler handles one kind of message. handle acknowledges (or
// terminates) the message itself and returns nil, or returns why the
// message must come back later. abandon is the message's terminal path
// once it has been delivered DeliveryLimit times and still failed.
type handler struct {
	handle  func(ctx context.Context, m jetstream.Msg) error
	abandon func(ctx context.Context, m jetstream.Msg, deliveries int, cause error) error
}

// Bounds of the work on one message, within Run's context: handling it,
// waiting for a generation slot included; ending it at its delivery
// limit; answering an endpoint request.
const (
	handleTimeout   = 5 * time.Minute
	abandonTimeout  = time.Minute
	endpointTimeout = 10 * time.Second
	// storeTimeout bounds each read or write of the store within a
	// handler. A request the server received and never answered (it died,
	// or it was still recovering its streams) would otherwise hold the
	// handler, and every message behind its lock, until handleTimeout.
	storeTimeout = 15 * time.Second
)

// storeOp is ctx for one store operation: at most storeTimeout.
func storeOp(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, storeTimeout)
}

// handle runs h on m with a deadline, keeps the message from being
// redelivered while it runs (a request may wait for a generation slot for
// longer than AckWait), turns a panic into an error, and hands the message
// back with a growing delay, or takes its terminal path at the delivery
// limit.
func (s *Service) handle(m jetstream.Msg, h handler) {
	ctx, cancel := context.WithTimeout(s.stopping, handleTimeout)
	defer cancel()
	stop := s.keepAlive(m)
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				s.log.Error().Str("panic", fmt.Sprint(r)).Str("stack", string(debug.Stack())).Str("subject", m.Subject()).Msg("planner bug")
				err = fmt.Errorf("planner bug: %v", r)
			}
		}()
		return h.handle(ctx, m)
	}()
	stop()
	if err == nil {
		return
	}
	n := bus.Deliveries(m)
	if n < s.cfg.DeliveryLimit || errors.Is(err, errHandBack) || errors.Is(err, agent.ErrStopping) || s.stopping.Err() != nil {
		// A planner that stops hands its messages back whatever their
		// deliveries: they did not fail, they were interrupted, which is
		// no news to the person who stopped it.
		ev := s.log.Warn()
		switch {
		case s.stopping.Err() != nil:
			ev = s.log.Debug()
			_ = m.Nak()
		case errors.Is(err, agent.ErrStopping):
			// Its agent is being stopped: it comes back to a stopped one.
			ev = s.log.Debug()
			_ = m.NakWithDelay(agent.Tick)
		default:
			_ = m.NakWithDelay(bus.RetryDelay(n))
		}
		ev.Err(err).Str("subject", m.Subject()).Int("deliveries", n).Msg("message handed back")
		return
	}
	actx, acancel := context.WithTimeout(s.stopping, abandonTimeout)
	defer acancel()
	if aerr := h.abandon(actx, m, n, err); aerr != nil {
		s.log.Error().Err(aerr).AnErr("cause", err).Str("subject", m.Subject()).Int("deliveries", n).
			Msg("cannot end a message at its delivery limit; handing it back")
		_ = m.NakWithDelay(bus.RetryDelay(n))
	}
}

// keepAlive tells JetStream every AckWait/3 that m is in hand, until the
// returned function is called.
func (s *Service) keepAlive(m jetstream.Msg) func() {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(max(s.cfg.AckWait/3, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = m.InProgress()
			}
		}
	}()
	return func() { close(done) }
}

// lock serialises the handling of one request's (one agent's) messages in
// this process.
func (s *Service) lock(key string) func() { return s.locks.lock(key) }

// keyedLocks are mutexes by key, made as they are wanted and dropped when
// nobody holds or waits for them. Unlike striped locks, a key waits only
// for its own holder: a search of one request (five seconds, say) never
// holds up another's messages. Safe for concurrent use; the zero value is
// ready.
type keyedLocks struct {
	mu   sync.Mutex
	keys map[string]*keyedLock
}

type keyedLock struct {
	mu   sync.Mutex
	refs int // holders and waiters
}

// lock waits for key's lock and returns the function that releases it.
func (k *keyedLocks) lock(key string) func() {
	k.mu.Lock()
	if k.keys == nil {
		k.keys = map[string]*keyedLock{}
	}
	l := k.keys[key]
	if l == nil {
		l = &keyedLock{}
		k.keys[key] = l
	}
	l.refs++
	k.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(k.keys, key)
		}
		k.mu.Unlock()
	}
}
