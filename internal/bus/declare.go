package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Streams returns the configs of every planbus stream.
func (c Config) Streams() []jetstream.StreamConfig {
	c = c.Defaults()
	short := min(time.Hour, c.Retention)
	return []jetstream.StreamConfig{
		{
			Name: StreamPlans, Description: "planbus: plans to execute",
			Subjects: []string{SubjectPlansAll}, Retention: jetstream.LimitsPolicy,
			MaxAge: c.Retention, Duplicates: c.DuplicateWindow, SubjectTransform: c.partitioned(SubjectPlansAll),
		},
		{
			// Per-message TTLs: the dispatchers' keeper message (KeeperSubject).
			Name: StreamTools, Description: "planbus: tool calls, one work queue per skill",
			Subjects: []string{SubjectToolsAll}, Retention: jetstream.WorkQueuePolicy,
			MaxAge: c.Retention, Duplicates: c.DuplicateWindow, AllowMsgTTL: true,
		},
		{
			// Kept as long as plan state: a plan's state points at its results.
			// Atomic batches: a worker stores the results that finish
			// together in one (one flush of a store synced always; see
			// worker/results.go).
			Name: StreamResults, Description: "planbus: tool results",
			Subjects: []string{SubjectResultsAll}, Retention: jetstream.LimitsPolicy,
			MaxAge: c.Retention, Duplicates: c.resultsDuplicateWindow(), SubjectTransform: c.partitioned(SubjectResultsAll),
			AllowAtomicPublish: true,
		},
		{
			// Message schedules: running plans' timeouts wait as schedules
			// (TimeoutScheduleSubject), which need roll-ups.
			Name: StreamTimers, Description: "planbus: dispatcher timers (retry backoff, plan timeouts)",
			Subjects: []string{SubjectTimersAll}, Retention: jetstream.WorkQueuePolicy,
			MaxAge: c.Retention, Duplicates: c.DuplicateWindow, SubjectTransform: c.partitioned(SubjectTimersAll),
			AllowMsgSchedules: true, AllowRollup: true,
		},
		{
			Name: StreamExecutions, Description: "planbus: execution results",
			Subjects: []string{SubjectExecutionsAll}, Retention: jetstream.LimitsPolicy,
			MaxAge: c.Retention, Duplicates: c.DuplicateWindow,
		},
		{
			// Events are for watching: kept in memory, the oldest dropped
			// first, so they cost the store no disk writes.
			Name: StreamEvents, Description: "planbus: progress events",
			Subjects: EventSubjectsKept(c.KeepEvents), Retention: jetstream.LimitsPolicy,
			MaxAge: short, MaxBytes: EventsMaxBytes, Discard: jetstream.DiscardOld, Storage: jetstream.MemoryStorage,
		},
		{
			Name: StreamRequests, Description: "planbus: accepted plan requests",
			Subjects: []string{SubjectRequestsAll}, Retention: jetstream.LimitsPolicy,
			MaxAge: c.Retention, Duplicates: c.DuplicateWindow,
		},
		{
			Name: StreamOutcomes, Description: "planbus: request outcomes, the last per request kept",
			Subjects: []string{SubjectOutcomesAll}, Retention: jetstream.LimitsPolicy,
			MaxAge: c.Retention, Duplicates: c.DuplicateWindow, MaxMsgsPerSubject: 1,
		},
		{
			Name: StreamAgents, Description: "planbus: wake-ups of GOAP agents, due now or at a time",
			Subjects: []string{SubjectAgentsAll}, Retention: jetstream.WorkQueuePolicy,
			MaxAge: c.Retention, Duplicates: c.DuplicateWindow,
		},
		{
			// Schedules are message schedules (ScheduleSubject) the server
			// fires into the same stream (ScheduleTickSubject), kept until
			// removed: no age; the last ticks of each are kept.
			Name: StreamSchedules, Description: "planbus: schedules of requests, and their ticks",
			Subjects: []string{SubjectSchedulesAll}, Retention: jetstream.LimitsPolicy,
			MaxMsgsPerSubject: ScheduleTicksKept, Duplicates: c.DuplicateWindow,
			AllowMsgSchedules: true, AllowRollup: true,
		},
	}
}

// EventsMaxBytes caps the events stream. The server's memory store holds
// about 1.8 times the bytes it counts (a message's record, its subject,
// the indexes), and a process's RSS is about twice its live heap: 64 MiB
// counted is about 115 MB of heap, the events of some 15,000 five-tool
// plans (an hour of them up to 4 plans a second; fewer minutes at higher
// rates, the oldest dropped first). Events are for watching; what a plan
// did stays in its state and execution result for the retention.
const EventsMaxBytes = 64 << 20

// ResultsDuplicateWindow is the most a result's message id is remembered
// for (less when DuplicateWindow is). A result stored twice is harmless:
// dispatchers apply one result per attempt, from the plan's state. The
// window only spares them the second one of a publish tried again, which
// comes within seconds, or of a call run again after its worker's ack
// wait ran out. Ids cost the server about 170 bytes of memory each for
// the window, five a five-tool plan here: at 300 plans a second, 10
// minutes of them were 150 MB.
const ResultsDuplicateWindow = 2 * time.Minute

func (c Config) resultsDuplicateWindow() time.Duration {
	return min(c.DuplicateWindow, ResultsDuplicateWindow)
}

// partitioned is the subject transform that splits the stream of
// subjects all into c.Partitions partitions by plan id.
func (c Config) partitioned(all string) *jetstream.SubjectTransformConfig {
	p := Partitioned(all)
	return &jetstream.SubjectTransformConfig{Source: p.Published(), Destination: p.Transform(c.Partitions)}
}

// Buckets returns the configs of every planbus KV bucket.
func (c Config) Buckets() []jetstream.KeyValueConfig {
	c = c.Defaults()
	return []jetstream.KeyValueConfig{
		{Bucket: BucketPlans, Description: "planbus: plans and their execution state", TTL: c.Retention, History: 1},
		{Bucket: BucketSkills, Description: "planbus: skill manifests", History: 1},
		{Bucket: BucketHealth, Description: "planbus: skill health per session", History: 5},
		{Bucket: BucketSessions, Description: "planbus: session state documents", History: 5},
		{Bucket: BucketRequests, Description: "planbus: replan loop state per request", TTL: c.Retention, History: 1},
		{Bucket: BucketKeys, Description: "planbus: dispatcher secrets (result signing key)", History: 1},
		{Bucket: BucketAgents, Description: "planbus: GOAP agent state per session", History: 1},
		{Bucket: BucketGuides, Description: "planbus: guided sessions and their active plans", TTL: c.Retention, History: 1},
	}
}

// ErrDenied means the server refused an operation: the connection's role
// may not do it.
var ErrDenied = errors.New("bus: permission denied")

// Declare creates or updates every stream and bucket. It is idempotent and
// every component calls it at start, so they may start in any order. The
// system-wide settings left unset in c.Config (Replicas, Retention,
// Partitions, KeepEvents) are first taken from the streams that exist
// (adopt), so a process joining a system keeps its settings; c.Config
// holds them afterwards. Every
// stream uses direct gets, so any replica can answer reads by sequence.
// While the server answers that JetStream is not ready (a cluster still
// electing its leaders) Declare waits and tries again, until ctx ends.
//
// On a server with authorization, a connection with a Role creates only
// what its role may (roles.go) and waits for the others it needs to
// exist, saying so in the log, until ctx ends: a worker started before
// any planner or dispatcher waits for them. An operation the server
// refuses is an error wrapping ErrDenied.
func (c *Conn) Declare(ctx context.Context) error {
	if err := c.adopt(ctx); err != nil {
		return err
	}
	role := c.Config.Role
	limited := role != "" && c.NC.AuthRequired()
	for _, sc := range c.Config.Streams() {
		if limited && !role.mayDeclare(sc.Name) {
			if role.needs(sc.Name) {
				if err := c.awaitStream(ctx, sc.Name, "stream "+sc.Name); err != nil {
					return err
				}
			}
			continue
		}
		sc.Replicas = c.Config.Replicas
		if sc.Storage != jetstream.MemoryStorage {
			sc.Storage = jetstream.FileStorage
		}
		sc.MaxMsgSize = c.Config.MaxPayload
		sc.AllowDirect = true
		if err := c.persistMode(ctx, &sc); err != nil {
			return fmt.Errorf("bus: declare stream %s: %w", sc.Name, err)
		}
		err := c.retryTransient(ctx, sc.Name, func(ctx context.Context) error {
			_, err := c.JS.CreateOrUpdateStream(ctx, sc)
			if err != nil && sc.Name == StreamEvents {
				err = c.replaceEvents(ctx, sc, err)
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("bus: declare stream %s: %w", sc.Name, err)
		}
	}
	for _, kc := range c.Config.Buckets() {
		if limited && !role.mayDeclare(kc.Bucket) {
			if role.needs(kc.Bucket) {
				if err := c.awaitStream(ctx, kvStream(kc.Bucket), "bucket "+kc.Bucket); err != nil {
					return err
				}
			}
			continue
		}
		kc.Replicas = c.Config.Replicas
		kc.Storage = jetstream.FileStorage
		kc.MaxValueSize = c.Config.MaxPayload
		err := c.retryTransient(ctx, kvStream(kc.Bucket), func(ctx context.Context) error {
			return c.declareBucket(ctx, kc)
		})
		if err != nil {
			return fmt.Errorf("bus: declare bucket %s: %w", kc.Bucket, err)
		}
	}
	return nil
}

// awaitStream waits until the stream exists. what names it for the log
// ("stream PLANBUS_TOOLS", "bucket planbus-skills").
func (c *Conn) awaitStream(ctx context.Context, stream, what string) error {
	said := false
	err := c.retryTransient(ctx, stream, func(ctx context.Context) error {
		_, err := c.JS.Stream(ctx, stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			if !said {
				c.log.Warn().Str("role", string(c.Config.Role)).
					Msgf("waiting for %s: the %s role may not create it; a planner or dispatcher creates it when it starts (or run one with the admin seed)",
						what, c.Config.Role)
				said = true
			}
			return errNotYet
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("bus: %s: %w", what, err)
	}
	if said {
		c.log.Info().Msgf("%s is there", what)
	}
	return nil
}

// errNotYet is retried by retryTransient.
var errNotYet = errors.New("bus: not there yet")

// replaceEvents deletes and recreates the events stream when an update
// cannot change it in place (its storage moved from file to memory):
// events are for watching, and losing the old ones is harmless.
func (c *Conn) replaceEvents(ctx context.Context, sc jetstream.StreamConfig, updateErr error) error {
	st, err := c.JS.Stream(ctx, sc.Name)
	if err != nil || st.CachedInfo().Config.Storage == sc.Storage {
		return updateErr
	}
	if err := c.JS.DeleteStream(ctx, sc.Name); err != nil {
		return fmt.Errorf("%w (and deleting it to recreate it failed: %v)", updateErr, err)
	}
	_, err = c.JS.CreateStream(ctx, sc)
	return err
}

// attemptTimeout bounds one JetStream API request of Declare: a request the
// server drops (one the role may not make) is only noticed when it times
// out.
const attemptTimeout = 5 * time.Second

// retryTransient calls f until it succeeds, fails for a reason other than
// JetStream not being ready, or ctx ends; each call gets attemptTimeout. A
// request that timed out because the server refused it (a permissions
// violation naming stream) is not retried: it fails with ErrDenied.
func (c *Conn) retryTransient(ctx context.Context, stream string, f func(context.Context) error) error {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 200 * time.Millisecond
	b.MaxInterval = 2 * time.Second
	b.MaxElapsedTime = 0
	return backoff.Retry(func() error {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		err := f(actx)
		cancel()
		if err == nil || errors.Is(err, errNotYet) {
			return err
		}
		if denied := c.denied(stream); denied != nil {
			return backoff.Permanent(denied)
		}
		if transient(err) {
			return err
		}
		return backoff.Permanent(err)
	}, backoff.WithContext(b, ctx))
}

// denied returns ErrDenied with the server's words when the connection's
// last error is a permissions violation on a subject about stream, or on
// the connection's own reply inbox: a seed of another role than the one
// the component connects as gets no answer to any request, which would
// otherwise look like a server that does not answer yet, for ever.
func (c *Conn) denied(stream string) error {
	le := c.NC.LastError()
	if le == nil || !errors.Is(le, nats.ErrPermissionViolation) {
		return nil
	}
	if inbox := c.NC.Opts.InboxPrefix; inbox != "" && strings.Contains(le.Error(), `Subscription to "`+inbox+".") {
		return fmt.Errorf("%w: the server refuses this connection's reply inbox %s (%v): is the seed given (--nkey) the %s role's, %s?",
			ErrDenied, inbox, le, c.Config.Role, SeedFileName(c.Config.Role))
	}
	if !strings.Contains(le.Error(), "."+stream+`"`) {
		return nil
	}
	return fmt.Errorf("%w: %v (role %q)", ErrDenied, le, c.Config.Role)
}

// transient: the server is up but JetStream cannot answer yet (no leader,
// no quorum, a request that timed out).
func transient(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Code >= 500
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled)
}
