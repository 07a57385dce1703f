package bus

import (
	"context"
	"errors"
	"fmt"
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
			MaxAge: c.Retention, Duplicates: c.DuplicateWindow,
		},
		{
			Name: StreamTools, Description: "planbus: tool calls, one work queue per skill",
			Subjects: []string{SubjectToolsAll}, Retention: jetstream.WorkQueuePolicy,
			MaxAge: c.Retention, Duplicates: c.DuplicateWindow,
		},
		{
			// Kept as long as plan state: a plan's state points at its results.
			Name: StreamResults, Description: "planbus: tool results",
			Subjects: []string{SubjectResultsAll}, Retention: jetstream.LimitsPolicy,
			MaxAge: c.Retention, Duplicates: c.DuplicateWindow,
		},
		{
			Name: StreamTimers, Description: "planbus: dispatcher timers (retry backoff, plan timeouts)",
			Subjects: []string{SubjectTimersAll}, Retention: jetstream.WorkQueuePolicy,
			MaxAge: c.Retention, Duplicates: c.DuplicateWindow,
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
			Subjects: []string{SubjectEventsAll}, Retention: jetstream.LimitsPolicy,
			MaxAge: short, MaxBytes: 256 << 20, Discard: jetstream.DiscardOld, Storage: jetstream.MemoryStorage,
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
	}
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
	}
}

// Declare creates or updates every stream and bucket. It is idempotent and
// every component calls it at start, so they may start in any order. Every
// stream uses direct gets, so any replica can answer reads by sequence.
// While the server answers that JetStream is not ready (a cluster still
// electing its leaders) Declare waits and tries again, until ctx ends.
func (c *Conn) Declare(ctx context.Context) error {
	for _, sc := range c.Config.Streams() {
		sc.Replicas = c.Config.Replicas
		if sc.Storage != jetstream.MemoryStorage {
			sc.Storage = jetstream.FileStorage
		}
		sc.MaxMsgSize = c.Config.MaxPayload
		sc.AllowDirect = true
		err := retryTransient(ctx, func() error {
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
		kc.Replicas = c.Config.Replicas
		kc.Storage = jetstream.FileStorage
		kc.MaxValueSize = c.Config.MaxPayload
		err := retryTransient(ctx, func() error {
			_, err := c.JS.CreateOrUpdateKeyValue(ctx, kc)
			return err
		})
		if err != nil {
			return fmt.Errorf("bus: declare bucket %s: %w", kc.Bucket, err)
		}
	}
	return nil
}

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

// retryTransient calls f until it succeeds, fails for a reason other than
// JetStream not being ready, or ctx ends.
func retryTransient(ctx context.Context, f func() error) error {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 200 * time.Millisecond
	b.MaxInterval = 2 * time.Second
	b.MaxElapsedTime = 0
	return backoff.Retry(func() error {
		err := f()
		if err == nil || transient(err) {
			return err
		}
		return backoff.Permanent(err)
	}, backoff.WithContext(b, ctx))
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
