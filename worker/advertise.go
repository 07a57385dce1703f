package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/skill"
)

// awaitEvery is how often a worker started before planbus looks again for
// the bucket and stream it needs.
const awaitEvery = time.Second

// refusedEvery is how often a request refusable waits on is checked for a
// refusal.
const refusedEvery = 50 * time.Millisecond

// advertise puts each skill's manifest in the skills bucket and creates or
// updates its consumer; it returns the bucket.
func (w *Worker) advertise(ctx context.Context) (jetstream.KeyValue, []jetstream.Consumer, error) {
	kv, err := w.awaitPlanbus(ctx)
	if err != nil {
		return nil, nil, err
	}
	consumers := make([]jetstream.Consumer, len(w.skills))
	for i, s := range w.skills {
		m := s.skill.Manifest
		b, _ := json.Marshal(m)
		w.compareManifest(ctx, kv, m, b)
		err := w.refusable(ctx, "$KV."+bus.BucketSkills+"."+m.Name, func(ctx context.Context) error {
			_, err := kv.Put(ctx, m.Name, b)
			return err
		})
		if err != nil {
			return nil, nil, fmt.Errorf("worker: advertise skill %s: %w", m.Name, err)
		}
		maxAck := 100000
		if m.Concurrency > 0 {
			maxAck = m.Concurrency
		}
		ackWait, err := w.consumerAckWait(ctx, m.Name)
		if err != nil {
			return nil, nil, err
		}
		var cons jetstream.Consumer
		create := "$JS.API.CONSUMER.CREATE." + bus.StreamTools + "." + bus.SkillConsumer(m.Name) + "." + bus.ToolSubject(m.Name)
		err = w.refusable(ctx, create, func(ctx context.Context) (err error) {
			cons, err = w.js.CreateOrUpdateConsumer(ctx, bus.StreamTools, jetstream.ConsumerConfig{
				Durable:       bus.SkillConsumer(m.Name),
				Description:   "planbus: calls of skill " + m.Name + ", shared by its workers",
				FilterSubject: bus.ToolSubject(m.Name),
				AckPolicy:     jetstream.AckExplicitPolicy,
				AckWait:       ackWait,
				// Above MaxDeliver, where the worker reports WORKER_CRASH, so
				// that report gets deliveries of its own; then the server
				// stops and the plan's timeout ends the call.
				MaxDeliver:    bus.ConsumerMaxDeliver(w.cfg.MaxDeliver),
				MaxAckPending: maxAck,
				MaxWaiting:    4096,
			})
			return err
		})
		if err != nil {
			return nil, nil, fmt.Errorf("worker: consumer for skill %s: %w", m.Name, err)
		}
		s.ackWait.Store(int64(ackWait))
		consumers[i] = cons
	}
	return kv, consumers, nil
}

// compareManifest warns when the skill is advertised with another
// manifest than m (mine is its JSON): another program serving a skill of the
// same name, or another version of this one. Its workers share the
// skill's calls, and the last manifest put is the one planners see.
func (w *Worker) compareManifest(ctx context.Context, kv jetstream.KeyValue, m skill.Manifest, mine []byte) {
	var entry jetstream.KeyValueEntry
	err := w.refusable(ctx, "$JS.API.DIRECT.GET.KV_"+bus.BucketSkills+".$KV."+bus.BucketSkills+"."+m.Name, func(ctx context.Context) (err error) {
		entry, err = kv.Get(ctx, m.Name)
		return err
	})
	if err != nil || bytes.Equal(entry.Value(), mine) {
		return // not advertised yet, or not readable with this seed
	}
	var theirs skill.Manifest
	_ = json.Unmarshal(entry.Value(), &theirs)
	w.log.Warn("the skill is advertised with another manifest than this worker's: every worker serving a skill of this name shares its calls, and the manifest put last (this one) is what planners see; give another program's skill another name",
		slog.String("skill", m.Name), slog.String("advertised_version", theirs.Version), slog.String("version", m.Version))
}

// awaitPlanbus waits until the skills bucket and the tools stream exist (a
// planner or dispatcher creates them when it starts), saying so once in
// the log, and returns the bucket. It gives up when ctx ends, or at once
// when the server refuses this connection what it needs.
func (w *Worker) awaitPlanbus(ctx context.Context) (jetstream.KeyValue, error) {
	said := false
	for {
		var kv jetstream.KeyValue
		err := w.refusable(ctx, "$JS.API.STREAM.INFO.KV_"+bus.BucketSkills, func(ctx context.Context) (err error) {
			kv, err = w.js.KeyValue(ctx, bus.BucketSkills)
			return err
		})
		missing := "bucket " + bus.BucketSkills
		if err == nil {
			err = w.refusable(ctx, "$JS.API.STREAM.INFO."+bus.StreamTools, func(ctx context.Context) error {
				_, err := w.js.Stream(ctx, bus.StreamTools)
				return err
			})
			missing = "stream " + bus.StreamTools
		}
		switch {
		case err == nil:
			if said {
				w.log.Info("planbus's streams are there; serving")
			}
			return kv, nil
		case !errors.Is(err, jetstream.ErrBucketNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound):
			return nil, fmt.Errorf("worker: %s: %w", missing, err)
		case !said:
			w.log.Warn("waiting for planbus: " + missing + " is not there yet; a planner or dispatcher creates it when it starts")
			said = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("worker: %s: not there (is planbus running on this server?): %w", missing, ctx.Err())
		case <-time.After(awaitEvery):
		}
	}
}

// consumerAckWait is the AckWait to declare skill's consumer with: the
// one it has when it exists and Config.AckWait was not given, so that
// workers of a skill agree; else Config.AckWait, logged when it changes
// the consumer's.
func (w *Worker) consumerAckWait(ctx context.Context, skill string) (time.Duration, error) {
	var info *jetstream.ConsumerInfo
	subject := "$JS.API.CONSUMER.INFO." + bus.StreamTools + "." + bus.SkillConsumer(skill)
	err := w.refusable(ctx, subject, func(ctx context.Context) error {
		c, err := w.js.Consumer(ctx, bus.StreamTools, bus.SkillConsumer(skill))
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			return nil
		}
		if err == nil {
			info = c.CachedInfo()
		}
		return err
	})
	switch {
	case err != nil:
		return 0, fmt.Errorf("worker: consumer for skill %s: %w", skill, err)
	case info == nil:
		return w.cfg.AckWait, nil
	case !w.ackWaitGiven:
		return info.Config.AckWait, nil
	case info.Config.AckWait != w.cfg.AckWait:
		w.log.Warn("this worker's AckWait changes the ack wait of the skill's consumer for every worker of the skill (leave it unset to keep the consumer's)",
			slog.String("skill", skill), slog.Duration("consumer_ack_wait", info.Config.AckWait), slog.Duration("ack_wait", w.cfg.AckWait))
	}
	return w.cfg.AckWait, nil
}

// refusable runs op, a request on subject, and ends it as soon as the
// server refuses this connection that subject: a server drops a request
// its sender may not publish and tells why only on the connection's error
// stream (nats.Conn.LastError), so a worker whose credentials do not
// cover a skill would otherwise wait for ever. The error then says so.
func (w *Worker) refusable(ctx context.Context, subject string, op func(context.Context) error) error {
	refused := func() error {
		if le := w.nc.LastError(); le != nil && errors.Is(le, nats.ErrPermissionViolation) && strings.Contains(le.Error(), `"`+subject+`"`) {
			return fmt.Errorf("the server refused it: %w; a worker needs the worker role's seed (worker.nk), or a worker group's that covers the skill (planner auth init --worker), and worker.RoleInbox()", le)
		}
		return nil
	}
	before := w.nc.LastError()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- op(ctx) }()
	tick := time.NewTicker(refusedEvery)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				if r := refused(); r != nil && w.nc.LastError() != before {
					return r
				}
			}
			return err
		case <-tick.C:
			if r := refused(); r != nil && w.nc.LastError() != before {
				return r
			}
		}
	}
}

func (w *Worker) skillNames() []string {
	var out []string
	for _, s := range w.skills {
		out = append(out, s.skill.Manifest.Name)
	}
	return out
}
