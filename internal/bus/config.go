package bus

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
)

// DefaultPartitions is Config.Partitions' default, and MaxPartitions its
// largest value.
const (
	DefaultPartitions = 8
	MaxPartitions     = 256
)

// DefaultRetention is Config.Retention's default.
const DefaultRetention = 24 * time.Hour

// ErrInvalidConfig is matched by every error Config.Validate returns.
var ErrInvalidConfig = errors.New("bus: invalid config")

// Config says how to reach NATS and how to shape what planbus declares on it.
type Config struct {
	// URL of an external NATS server or cluster (comma-separated). Empty
	// means: start an embedded JetStream server (see Listen and DataDir).
	URL string
	// CredsFile is a NATS credentials file (JWT and nkey seed).
	CredsFile string
	// NKeySeedFile is a file holding an nkey seed to authenticate with.
	NKeySeedFile string
	// TLSCAFile is a PEM file of CAs to verify the server with.
	TLSCAFile string
	// Name is the client connection name shown by the server.
	Name string
	// ConnectTimeout bounds how long Dial waits for the server to answer
	// before it gives up. 0 means it keeps trying until its context ends,
	// which suits long-running components that may start before NATS.
	ConnectTimeout time.Duration
	// Role is who the connection is when the server has authorization on
	// (roles.go): it picks the inbox prefix the role may receive replies
	// on, and what Declare creates and what it waits for. Empty: a
	// connection that declares everything (no authorization, or an
	// operator's), with the default inbox.
	Role Role
	// Client is the named client the connection is (planner auth
	// add-client), with Role client: it receives its replies on its own
	// inbox (ClientInbox). Empty: the shared client role, or the name a
	// seed file called client-<name>.nk gives (NKeySeedFile).
	Client string

	// Listen is the embedded server's address. Default 127.0.0.1:4222;
	// port 0 picks a free port.
	Listen string
	// DataDir is the embedded server's JetStream store. Default
	// DefaultDataDir().
	DataDir string

	// Replicas of every stream and bucket; use 3 on a cluster.
	//
	// Replicas, Retention, Partitions and KeepEvents are the system's
	// settings: left zero, Conn.Declare takes them from the streams that
	// exist, so a process joining a running system keeps them, and the
	// defaults (1, 24h, DefaultPartitions, KeepAllEvents) apply only to a
	// new system. A value given that differs from the system's changes
	// the streams when they are declared.
	Replicas int
	// Retention is how long plans, plan state, tool results, execution
	// results, requests and outcomes are kept after their last write,
	// and the longest a plan may run (dispatchers refuse plans whose
	// timeout does not fit, so nothing of a running plan expires).
	// Default 24h (see Replicas). Events are kept for at most an hour of
	// it.
	Retention time.Duration
	// Partitions splits the plans, results and timers streams by plan id
	// (a subject transform stores planbus.results.<planId> as
	// planbus.results.<partition>.<planId>), and each partition is
	// consumed by one dispatcher, so one dispatcher applies all of a
	// plan's messages and dispatchers do not contend for its state.
	// Default DefaultPartitions (see Replicas); change it only with no
	// plan running.
	Partitions int
	// DuplicateWindow is how long a message id is remembered for
	// de-duplication on the tool, result and plan streams. Default 10m, or
	// the retention if shorter. It
	// must exceed the consumers' AckWait: a redelivered message republishes
	// its effects within this window, where they are de-duplicated.
	DuplicateWindow time.Duration
	// KeepEvents is which progress events the events stream keeps for
	// those who read them back (planner watch, the web view,
	// client.Watch); every event is published live either way. Default
	// KeepAllEvents (see Replicas).
	KeepEvents KeepEvents
	// MaxPayload of the embedded server, in bytes. Default 8 MiB.
	MaxPayload int32
	// Sync is when the embedded server's store is flushed to disk
	// (fsync). The zero value is DefaultSync. See docs/deploy.md for what
	// each setting guarantees.
	Sync Sync
	// WriteBehind, when positive, has Declare create the stores that hold
	// only what dispatchers derive from acknowledged messages (the tool
	// calls of PLANBUS_TOOLS, the plan states of bucket planbus-plans and
	// the execution results of PLANBUS_EXECUTIONS: WrittenBehind)
	// with their writes flushed behind (JetStream's async persist mode,
	// single replica only), and is the longest such a write takes to
	// reach the disk. Dispatchers then acknowledge the messages they
	// derived something from only WriteBehind after the derived writes,
	// so a crash loses nothing a message acknowledged: what is lost is
	// derived again from the messages delivered again (see
	// docs/architecture.md, "Writes behind"). The stores that hold what
	// others are told is stored (plans, results, timers, requests,
	// outcomes) are flushed as Sync says. Zero: every store is
	// flushed as Sync says; a store that exists keeps how it was created.
	// Set by the embedded server's owner (Sync.WriteBehind).
	WriteBehind time.Duration

	// InProcess is the embedded server of this process, when there is
	// one: Dial then connects to it through memory rather than a socket
	// (the server still authenticates and authorizes the connection as it
	// would on its port). StartServer's Server is one.
	InProcess nats.InProcessConnProvider
}

// KeepEvents names the progress events the events stream keeps.
type KeepEvents string

const (
	// KeepAllEvents keeps every event.
	KeepAllEvents KeepEvents = "all"
	// KeepOutcomeEvents keeps every event but the two each tool run
	// publishes before it ends, tool.released and tool.started: of a
	// plan's events, those that say what happened. They are most of a
	// plan's events (two of every tool's three), so the stream keeps
	// less than half as many and the server spends less CPU a tool.
	KeepOutcomeEvents KeepEvents = "outcomes"
)

// ParseKeepEvents reads "all" or "outcomes".
func ParseKeepEvents(s string) (KeepEvents, error) {
	switch k := KeepEvents(s); k {
	case KeepAllEvents, KeepOutcomeEvents:
		return k, nil
	}
	return "", fmt.Errorf("%w: KeepEvents: %q is neither %q nor %q", ErrInvalidConfig, s, KeepAllEvents, KeepOutcomeEvents)
}

// Sync says when a JetStream store is flushed to disk.
type Sync struct {
	// Always: every write is flushed before it is acknowledged.
	Always bool
	// Interval between flushes when not Always. 0 means DefaultSync.
	Interval time.Duration
}

// DefaultSync is planbus's choice for the embedded store; docs/deploy.md
// and docs/benchmarks.md give the reasons and the measured cost.
var DefaultSync = Sync{Always: true}

// ParseSync reads "always" or an interval such as "1s" or "2m".
func ParseSync(s string) (Sync, error) {
	if s == "always" {
		return Sync{Always: true}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return Sync{}, fmt.Errorf("%w: Sync: %q is neither \"always\" nor a positive interval like 1s", ErrInvalidConfig, s)
	}
	return Sync{Interval: d}, nil
}

// String is the form ParseSync reads.
func (s Sync) String() string {
	if s.Always {
		return "always"
	}
	if s.Interval == 0 {
		return DefaultSync.String()
	}
	return s.Interval.String()
}

// FlushInterval is the embedded server's flush interval: Interval, or,
// when Always is set, half of WriteBehind (the flushes of the stores
// written behind), else two minutes (nats-server's default).
func (s Sync) FlushInterval() time.Duration {
	if s.Interval > 0 {
		return s.Interval
	}
	if s.Always {
		return s.WriteBehind() / 2
	}
	return 2 * time.Minute
}

// DefaultWriteBehind is how soon a write behind reaches the disk on an
// embedded server flushing every write (Sync.Always): the server flushes
// and syncs what was written behind every half of it, and a write waits
// at most a few milliseconds in memory before it is written out.
const DefaultWriteBehind = 2 * time.Second

// WriteBehind is Config.WriteBehind for an embedded server with this
// policy: DefaultWriteBehind when Always (the derived stores are written
// behind, the others flushed each write), else zero (when every store is
// flushed on an interval, nothing is gained).
func (s Sync) WriteBehind() time.Duration {
	if s.Always {
		return DefaultWriteBehind
	}
	return 0
}

// Embedded reports whether the config asks for an embedded server.
func (c Config) Embedded() bool { return c.URL == "" }

// Defaults returns the config with zero fields set to their defaults.
func (c Config) Defaults() Config {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:4222"
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir()
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = min(10*time.Minute, c.Retention)
	}
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.KeepEvents == "" {
		c.KeepEvents = KeepAllEvents
	}
	if c.MaxPayload == 0 {
		c.MaxPayload = 8 << 20
	}
	if c.Name == "" {
		c.Name = "planbus"
	}
	if c.Sync == (Sync{}) {
		c.Sync = DefaultSync
	}
	return c
}

// Validate reports the first bad field.
func (c Config) Validate() error {
	c = c.Defaults()
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
	}
	if c.Embedded() {
		host, port, err := net.SplitHostPort(c.Listen)
		if err != nil {
			return bad("Listen", "%q is not host:port: %v", c.Listen, err)
		}
		if host == "" {
			return bad("Listen", "%q has no host; use 127.0.0.1:%s to listen on loopback", c.Listen, port)
		}
	}
	for field, path := range map[string]string{"CredsFile": c.CredsFile, "NKeySeedFile": c.NKeySeedFile, "TLSCAFile": c.TLSCAFile} {
		if path == "" {
			continue
		}
		if _, err := os.Stat(path); err != nil {
			return bad(field, "%v", err)
		}
	}
	if !c.Sync.Always && c.Sync.Interval < 0 {
		return bad("Sync", "interval %s is negative", c.Sync.Interval)
	}
	if c.ConnectTimeout < 0 {
		return bad("ConnectTimeout", "%s is negative", c.ConnectTimeout)
	}
	if c.WriteBehind < 0 {
		return bad("WriteBehind", "%s is negative", c.WriteBehind)
	}
	if c.Role != "" {
		if _, err := ParseRole(string(c.Role)); err != nil {
			return bad("Role", "%v", err)
		}
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		return bad("Replicas", "%d is not between 1 and 5", c.Replicas)
	}
	if c.Retention < 2*time.Minute {
		// Dispatchers refuse plans that do not end a minute before
		// their state expires: less than two would leave plans under a
		// minute.
		return bad("Retention", "%s is shorter than two minutes", c.Retention)
	}
	if c.DuplicateWindow < time.Second || c.DuplicateWindow > c.Retention {
		return bad("DuplicateWindow", "%s is not between 1s and the retention %s", c.DuplicateWindow, c.Retention)
	}
	if c.Partitions < 1 || c.Partitions > MaxPartitions {
		return bad("Partitions", "%d is not between 1 and %d", c.Partitions, MaxPartitions)
	}
	if _, err := ParseKeepEvents(string(c.KeepEvents)); err != nil {
		return err
	}
	if c.MaxPayload < 1<<20 || c.MaxPayload > 64<<20 {
		return bad("MaxPayload", "%d is not between 1 MiB and 64 MiB", c.MaxPayload)
	}
	return nil
}

// DefaultDataDir is $XDG_STATE_HOME/planbus, or ~/.local/state/planbus, or
// planbus-data in the working directory when there is no home.
func DefaultDataDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "planbus")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "state", "planbus")
	}
	return "planbus-data"
}
