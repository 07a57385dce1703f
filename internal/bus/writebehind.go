package bus

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Writes behind (Config.WriteBehind). At Sync.Always every stored message
// costs a flush of its own, one after another, and a tool took three:
// its call, the call's removal from the work queue when its worker
// acknowledged it, and its result; the plan's state took a fourth, shared
// by the results applied together, and its end a fifth, the execution
// result. Of these only the result holds something a worker was told is
// stored: a call, a plan state and an execution result are what a
// dispatcher derived from a plan, a result or a timer, and it can derive
// them again. So the stores of derived writes, PLANBUS_TOOLS, bucket
// planbus-plans and PLANBUS_EXECUTIONS, are written behind (JetStream's
// async persist mode), and a dispatcher acknowledges the messages it
// derived them from only once they are on disk, WriteBehind later: a
// crash before that delivers those messages again, and their handling
// writes again what was lost. What others are told is stored (a plan
// accepted, a result, a timer or command, a request, an outcome) is still
// flushed before it is acknowledged.

// MetaWriteBehind is the stream metadata key holding a written-behind
// store's WriteBehind, as a Go duration: dispatchers read it to know how
// long to hold their acknowledgements.
const MetaWriteBehind = "planbus.write-behind"

// WrittenBehind are the streams that hold only writes a dispatcher can
// derive again: the streams written behind.
var WrittenBehind = []string{StreamTools, kvStream(BucketPlans), StreamExecutions}

// writtenBehind reports whether stream is one of WrittenBehind.
func writtenBehind(stream string) bool {
	return slices.Contains(WrittenBehind, stream)
}

// persistMode sets how stream sc is persisted: as it was created when it
// exists (JetStream cannot change a stream's persist mode), else written
// behind when Config.WriteBehind is set, the stream holds derived writes
// and has a single replica. The metadata of a stream written behind names
// its WriteBehind (MetaWriteBehind).
func (c *Conn) persistMode(ctx context.Context, sc *jetstream.StreamConfig) error {
	if !writtenBehind(sc.Name) {
		return nil
	}
	existing, err := c.streamConfig(ctx, sc.Name)
	if err != nil {
		return err
	}
	behind := c.Config.WriteBehind
	switch {
	case existing != nil:
		sc.PersistMode = existing.PersistMode
		if behind <= 0 {
			behind = WriteBehindOf(existing)
		}
	case behind > 0 && sc.Replicas <= 1:
		sc.PersistMode = jetstream.AsyncPersistMode
	}
	if sc.PersistMode != jetstream.AsyncPersistMode {
		return nil
	}
	meta := make(map[string]string, len(sc.Metadata)+1)
	for k, v := range sc.Metadata {
		meta[k] = v
	}
	meta[MetaWriteBehind] = behind.String()
	sc.Metadata = meta
	return nil
}

// WriteBehindOf is how long a write to a stream of this configuration may
// take to reach the disk after it was acknowledged: zero for a stream
// that flushes as the server does, its MetaWriteBehind (or
// DefaultWriteBehind if that is missing or unreadable) for one in async
// persist mode.
func WriteBehindOf(sc *jetstream.StreamConfig) time.Duration {
	if sc == nil || sc.PersistMode != jetstream.AsyncPersistMode {
		return 0
	}
	if d, err := time.ParseDuration(sc.Metadata[MetaWriteBehind]); err == nil && d > 0 {
		return d
	}
	return DefaultWriteBehind
}

// kvStreamConfig is the stream that jetstream's CreateKeyValue makes of
// kc, for the fields planbus sets: a bucket written behind is declared as
// a stream, since a key-value config has no persist mode.
func kvStreamConfig(kc jetstream.KeyValueConfig) jetstream.StreamConfig {
	history := int64(max(kc.History, 1))
	maxMsgSize := kc.MaxValueSize
	if maxMsgSize == 0 {
		maxMsgSize = -1
	}
	dupes := 2 * time.Minute
	if kc.TTL > 0 && kc.TTL < dupes {
		dupes = kc.TTL
	}
	return jetstream.StreamConfig{
		Name: kvStream(kc.Bucket), Description: kc.Description,
		Subjects:          []string{fmt.Sprintf("$KV.%s.>", kc.Bucket)},
		MaxMsgsPerSubject: history, MaxBytes: -1, MaxAge: kc.TTL, MaxMsgSize: maxMsgSize,
		Storage: kc.Storage, Replicas: max(kc.Replicas, 1),
		AllowRollup: true, DenyDelete: true, Duplicates: dupes, MaxMsgs: -1, MaxConsumers: -1,
		AllowDirect: true, Discard: jetstream.DiscardNew,
	}
}

// declareBucket creates or updates a bucket: as a key-value bucket, or,
// when it is one written behind, as its stream.
func (c *Conn) declareBucket(ctx context.Context, kc jetstream.KeyValueConfig) error {
	if !writtenBehind(kvStream(kc.Bucket)) {
		_, err := c.JS.CreateOrUpdateKeyValue(ctx, kc)
		return err
	}
	sc := kvStreamConfig(kc)
	if err := c.persistMode(ctx, &sc); err != nil {
		return err
	}
	if sc.PersistMode != jetstream.AsyncPersistMode {
		_, err := c.JS.CreateOrUpdateKeyValue(ctx, kc)
		return err
	}
	_, err := c.JS.CreateOrUpdateStream(ctx, sc)
	return err
}
