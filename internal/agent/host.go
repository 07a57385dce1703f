package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/generator"
	"github.com/planbus/planbus/internal/request"
)

// Host is what agents need of the planner that runs them: its locks,
// generation slots, view of the skills, the cancels and outcomes of its
// plans, and its answers to callers. Its methods are safe for concurrent
// use.
type Host interface {
	// Lock waits for key's lock in this process and returns its release.
	Lock(key string) func()
	// Skills are the advertised skills' manifests.
	Skills(ctx context.Context) (map[string]planbus.SkillManifest, error)
	// Usable reports whether skill's health in the session lets plans
	// use it.
	Usable(sessionID, skill string) bool
	// EnterSearch waits for a slot of the agents' searches and for the
	// memory of r's budgets, and returns the budgets and the release. It
	// fails when ctx ends or the planner stops.
	EnterSearch(ctx context.Context, r *request.Request) (generator.Limits, func(), error)
	// CancelPlan cancels a running plan, saying why.
	CancelPlan(ctx context.Context, planID, reason string) error
	// PublishOutcome publishes the outcome of an agent that ended.
	PublishOutcome(ctx context.Context, o *planbus.Outcome) error
	// Drop terminates a message that is not handled, logging and
	// counting it.
	Drop(m jetstream.Msg, why string, cause error)
	// MaySession reports why caller may not act on the session, if it may
	// not; Reject answers an endpoint request with such an error, or with
	// a *request.Error.
	MaySession(ctx context.Context, caller, sessionID string) error
	Reject(req micro.Request, err error)
}

// Config of the agents of a planner.
type Config struct {
	// ID names the planner in the agents' state (AgentStatus.Planner).
	ID string
	// Domains reads the GOAP domains a start names, and decodes them.
	Domains generator.GOAP
	// Tracer records the agents' turns (planbus.agent.turn) and their
	// searches (planbus.generate).
	Tracer trace.Tracer
}

// Service runs the GOAP agents of one planner process: it starts them,
// takes their turns on the messages its planner hands it (OnWake,
// OnSessionChange, OnExecution), and answers planbus.agent.stop and
// planbus.agent.status. Create it with New and bind it with Open.
type Service struct {
	cfg      Config
	conn     *bus.Conn
	log      zerolog.Logger
	tracer   trace.Tracer
	host     Host
	goap     generator.GOAP
	outcomes jetstream.Stream // PLANBUS_OUTCOMES, read by subject: is an id taken
	stopping context.Context  // Open's context: every endpoint's derives from it
	agents   agentRuntime
}

// New prepares the agents of a planner on conn; log is the planner's.
func New(conn *bus.Conn, host Host, cfg Config, log zerolog.Logger) *Service {
	return &Service{cfg: cfg, conn: conn, log: log, tracer: cfg.Tracer, host: host, goap: cfg.Domains, stopping: context.Background()}
}

// ErrStopping ends a turn an agent's stop interrupts; its message comes
// back later (after a Tick), to an agent that is stopped.
var ErrStopping = errors.New("planner: the agent is being stopped")

// errStoreUnavailable: what a turn reads from KV could not be read; the
// message comes back.
var errStoreUnavailable = errors.New("planner: store unavailable")

// errNoAgent: the session has no agent.
var errNoAgent = errors.New("planner: not found")

// Bounds of one store operation and of an endpoint's work, the
// planner's.
const (
	storeTimeout    = 15 * time.Second
	endpointTimeout = 10 * time.Second
)

// storeOp is ctx for one store operation: at most storeTimeout.
func storeOp(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, storeTimeout)
}

// maxErrorMessage bounds the error messages an agent's state keeps.
const maxErrorMessage = 4 << 10

// tooLargeError: an agent's state takes more than the store holds.
type tooLargeError struct {
	size, limit int
}

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("planner: the agent's state takes %d bytes, over the store's limit of %d", e.size, e.limit)
}

func casLost(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)
}
