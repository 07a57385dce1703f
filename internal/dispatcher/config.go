package dispatcher

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/planbus/planbus/internal/execution"
	"github.com/planbus/planbus/internal/metrics"
	"go.opentelemetry.io/otel/trace"
)

// ErrInvalidConfig is matched by every error Config.validate returns.
var ErrInvalidConfig = errors.New("dispatcher: invalid config")

// Config of a dispatcher.
type Config struct {
	// ID names this dispatcher in logs and `nats micro info`.
	// Default <hostname>-<pid>.
	ID string
	// Shards is how many plans this process works on at once. Default 16.
	Shards int
	// DefaultMaxConcurrency applies to plans that set no maxConcurrency.
	// Default: the number of CPUs.
	DefaultMaxConcurrency int
	// AckWait of the dispatcher consumers: how soon a message a dead
	// dispatcher held goes to another. Default 30s.
	AckWait time.Duration
	// OpTimeout bounds each round of KV and publish calls of a batch:
	// reading a plan's state, or storing it and sending what follows. The
	// work between rounds (decoding a plan, checking gates up to their
	// budget) is not counted against it. Default 10s.
	OpTimeout time.Duration
	// MaxBatch is the most messages one shard applies in one state write.
	// Default 256.
	MaxBatch int
	// TimeoutGrace is how long a plan runs before its timeout is stored,
	// when the store flushes every write (--sync always; with a
	// write-behind the plan waits that instead): the acknowledgement of
	// the plan's message waits as long, so a plan that ends sooner never
	// stores one (a flushed schedule, its purge and the purge's removal).
	// Default 1s; negative: stored as the plan starts.
	TimeoutGrace time.Duration
	// CacheSize is how many running plans' engines are kept in memory.
	// Default 10000.
	CacheSize int
	// KnownSkill reports whether a skill exists; plans using others are
	// rejected. Default: the skill has a manifest in the skills bucket.
	KnownSkill func(string) bool
	// Version is reported by the micro service.
	Version string
	// DeliveryLimit is how many deliveries of a message a dispatcher tries
	// before it gives up on it: a plan that cannot be started ends
	// rejected (code DELIVERY_LIMIT); a result or a timer is dropped,
	// logged and counted (messagesDropped). It also bounds how often a
	// message ahead of its plan's state is handed back. Default 30; the
	// consumers allow a few more for that last step
	// (bus.ConsumerMaxDeliver).
	DeliveryLimit int
	// Tracer records the dispatcher's spans (planbus.plan, planbus.tool).
	// Default: the global TracerProvider, a no-op unless the process set
	// one up (export.Setup). Plans that arrive without trace context
	// are traced only when it records.
	Tracer trace.TracerProvider
	// Metrics, when set, is the process's registry: the dispatcher counts
	// plans, attempts, health changes, conflicts, rejected results and
	// dropped messages there, and reports each skill's backlog and workers
	// through it while it runs. Default: no metrics.
	Metrics *metrics.Registry
	// EveryPartition has the dispatcher consume every partition of the
	// plans' messages whatever other dispatchers run, as all do while
	// they disagree about who is there: their contention for a plan's
	// state then rests on its compare-and-set alone. For tests of that
	// path; leave it false.
	EveryPartition bool
	// StateChunkTools: a plan with more than twice as many tools keeps
	// its state in chunks of this many (execution.ChunkBy), so a write
	// costs what a batch changed rather than the whole plan. Default
	// execution.DefaultChunkTools (1024).
	StateChunkTools int
}

// DefaultDeliveryLimit is Config.DeliveryLimit's default.
const DefaultDeliveryLimit = 30

func (c Config) withDefaults() Config {
	if c.ID == "" {
		host, _ := os.Hostname()
		c.ID = host + "-" + strconv.Itoa(os.Getpid())
	}
	if c.Shards == 0 {
		c.Shards = 16
	}
	if c.DefaultMaxConcurrency == 0 {
		c.DefaultMaxConcurrency = runtime.NumCPU()
	}
	if c.AckWait == 0 {
		c.AckWait = 30 * time.Second
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = 10 * time.Second
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 256
	}
	if c.CacheSize == 0 {
		c.CacheSize = 10000
	}
	if c.TimeoutGrace == 0 {
		c.TimeoutGrace = time.Second
	}
	if c.Version == "" {
		c.Version = "0.0.0-dev"
	}
	if c.DeliveryLimit == 0 {
		c.DeliveryLimit = DefaultDeliveryLimit
	}
	if c.StateChunkTools == 0 {
		c.StateChunkTools = execution.DefaultChunkTools
	}
	return c
}

func (c Config) validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Shards < 1:
		return bad("Shards", "%d, want at least 1", c.Shards)
	case c.DefaultMaxConcurrency < 1:
		return bad("DefaultMaxConcurrency", "%d, want at least 1", c.DefaultMaxConcurrency)
	case c.AckWait < 100*time.Millisecond:
		return bad("AckWait", "%s, want at least 100ms", c.AckWait)
	case c.OpTimeout < 10*time.Millisecond:
		return bad("OpTimeout", "%s, want at least 10ms", c.OpTimeout)
	case c.MaxBatch < 1:
		return bad("MaxBatch", "%d, want at least 1", c.MaxBatch)
	case c.DeliveryLimit < 1:
		return bad("DeliveryLimit", "%d, want at least 1", c.DeliveryLimit)
	case c.StateChunkTools < 1:
		return bad("StateChunkTools", "%d, want at least 1", c.StateChunkTools)
	}
	return nil
}
