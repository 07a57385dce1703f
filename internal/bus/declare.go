package bus

import (
	"context"
	"fmt"
	"time"

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
	}
}

// Declare creates or updates every stream and bucket. It is idempotent and
// every component calls it at start, so they may start in any order. Every
// stream uses direct gets, so any replica can answer reads by sequence.
func (c *Conn) Declare(ctx context.Context) error {
	for _, sc := range c.Config.Streams() {
		sc.Replicas = c.Config.Replicas
		if sc.Storage != jetstream.MemoryStorage {
			sc.Storage = jetstream.FileStorage
		}
		sc.MaxMsgSize = c.Config.MaxPayload
		sc.AllowDirect = true
		if _, err := c.JS.CreateOrUpdateStream(ctx, sc); err != nil {
			return fmt.Errorf("bus: declare stream %s: %w", sc.Name, err)
		}
	}
	for _, kc := range c.Config.Buckets() {
		kc.Replicas = c.Config.Replicas
		kc.Storage = jetstream.FileStorage
		kc.MaxValueSize = c.Config.MaxPayload
		if _, err := c.JS.CreateOrUpdateKeyValue(ctx, kc); err != nil {
			return fmt.Errorf("bus: declare bucket %s: %w", kc.Bucket, err)
		}
	}
	return nil
}
