package planner

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/session"
	"github.com/planbus/planbus/internal/skills"
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
	// FallbackTemplates are the §5.3 texts; {input} is replaced by the
	// request's input. Default: the seed's three.
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
	locks      [256]sync.Mutex // a request's messages are handled one at a time; striped by id
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
		KindGOAP:     goapPlanner{domains: cfg.DomainsDir},
		KindTemplate: templatePlanner{lib: cfg.Templates},
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

// lock serialises the handling of one request's messages in this process.
// Locks are striped by the id's hash, so their number stays fixed however
// many requests pass through.
func (s *Service) lock(requestID string) func() {
	h := fnv.New32a()
	_, _ = h.Write([]byte(requestID))
	mu := &s.locks[h.Sum32()%uint32(len(s.locks))]
	mu.Lock()
	return mu.Unlock
}
