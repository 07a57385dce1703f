package bus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
)

// patience bounds every wait in these tests; an answer comes in
// milliseconds.
const patience = 10 * time.Second

// peer is a raw NATS connection as one role, reporting the server's
// asynchronous errors (permissions violations) on errs.
type peer struct {
	role bus.Role
	nc   *nats.Conn
	js   jetstream.JetStream
	errs chan error
}

func connectAs(t *testing.T, cfg bus.Config, seeds *bus.Seeds, role bus.Role) *peer {
	t.Helper()
	return connectWith(t, cfg, seeds.File(role), role)
}

// connectWith connects with the seed in file, with role's inbox.
func connectWith(t *testing.T, cfg bus.Config, file string, role bus.Role) *peer {
	t.Helper()
	opt, err := nats.NkeyOptionFromSeed(file)
	if err != nil {
		t.Fatal(err)
	}
	p := &peer{role: role, errs: make(chan error, 256)}
	p.nc, err = nats.Connect(cfg.URL, opt, nats.CustomInboxPrefix(role.InboxPrefix()),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case p.errs <- err:
			default:
			}
		}))
	if err != nil {
		t.Fatalf("%s: connect: %v", role, err)
	}
	t.Cleanup(p.nc.Close)
	p.js, _ = jetstream.New(p.nc)
	return p
}

// violation waits for the server to report that the peer may not use
// subject.
func (p *peer) violation(subject string) error {
	deadline := time.After(patience)
	for {
		select {
		case err := <-p.errs:
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), `"`+subject+`"`) {
				return nil
			}
		case <-deadline:
			return fmt.Errorf("no permissions violation for %s within %s", subject, patience)
		}
	}
}

// A check is one operation of a role: allowed ones must work, denied ones
// must get a permissions violation on subject.
type check struct {
	name    string
	allowed bool
	subject string // the subject a denied operation is refused on
	op      func(ctx context.Context, env *env, p *peer) error
}

// env is the server with an admin connection that sets the scene: it
// subscribes where a peer's publish should arrive, answers requests,
// writes entries for a peer to read.
type env struct {
	cfg   bus.Config
	seeds *bus.Seeds
	admin *peer
}

func allow(name string, op func(context.Context, *env, *peer) error) check {
	return check{name: name, allowed: true, op: op}
}

func deny(name, subject string, op func(context.Context, *env, *peer) error) check {
	return check{name: name, subject: subject, op: op}
}

// publish: a core publish that an admin subscriber must receive.
func publish(subject string) func(context.Context, *env, *peer) error {
	return func(ctx context.Context, e *env, p *peer) error {
		sub, err := e.admin.nc.SubscribeSync(subject)
		if err != nil {
			return err
		}
		defer func() { _ = sub.Unsubscribe() }()
		if err := e.admin.nc.Flush(); err != nil {
			return err
		}
		if err := p.nc.Publish(subject, []byte(`{}`)); err != nil {
			return err
		}
		_, err = sub.NextMsgWithContext(ctx)
		return err
	}
}

// jsPublish: a JetStream publish, acknowledged by its stream.
func jsPublish(subject string) func(context.Context, *env, *peer) error {
	return func(ctx context.Context, _ *env, p *peer) error {
		_, err := p.js.Publish(ctx, subject, []byte(`{}`))
		return err
	}
}

// batchOf: an atomic batch of one result on each subject (publishBatch),
// committed by its stream.
func batchOf(ackEach bool, subjects ...string) func(context.Context, *env, *peer) error {
	return func(ctx context.Context, _ *env, p *peer) error {
		_, err := publishBatch(ctx, p.nc, ackEach, subjects...)
		return err
	}
}

// subscribe: the peer receives what an admin publishes on sample.
func subscribe(subject, sample string) func(context.Context, *env, *peer) error {
	return func(ctx context.Context, e *env, p *peer) error {
		sub, err := p.nc.SubscribeSync(subject)
		if err != nil {
			return err
		}
		defer func() { _ = sub.Unsubscribe() }()
		if err := p.nc.Flush(); err != nil {
			return err
		}
		if err := e.admin.nc.Publish(sample, []byte(`{}`)); err != nil {
			return err
		}
		_, err = sub.NextMsgWithContext(ctx)
		return err
	}
}

// request: the peer's request is answered by an admin responder.
func request(subject string) func(context.Context, *env, *peer) error {
	return func(ctx context.Context, e *env, p *peer) error {
		sub, err := e.admin.nc.Subscribe(subject, func(m *nats.Msg) { _ = m.Respond([]byte(`{"ok":true}`)) })
		if err != nil {
			return err
		}
		defer func() { _ = sub.Unsubscribe() }()
		if err := e.admin.nc.Flush(); err != nil {
			return err
		}
		_, err = p.nc.RequestWithContext(ctx, subject, []byte(`{}`))
		return err
	}
}

// respond: the peer answers an admin's request on subject.
func respond(subject string) func(context.Context, *env, *peer) error {
	return func(ctx context.Context, e *env, p *peer) error {
		sub, err := p.nc.Subscribe(subject, func(m *nats.Msg) { _ = m.Respond([]byte(`{"ok":true}`)) })
		if err != nil {
			return err
		}
		defer func() { _ = sub.Unsubscribe() }()
		if err := p.nc.Flush(); err != nil {
			return err
		}
		_, err = e.admin.nc.RequestWithContext(ctx, subject, []byte(`{}`))
		return err
	}
}

// kvGet: the peer reads an entry an admin wrote.
func kvGet(bucket, key string) func(context.Context, *env, *peer) error {
	return func(ctx context.Context, e *env, p *peer) error {
		akv, err := e.admin.js.KeyValue(ctx, bucket)
		if err != nil {
			return err
		}
		if _, err := akv.Put(ctx, key, []byte(`{"v":1}`)); err != nil {
			return err
		}
		kv, err := p.js.KeyValue(ctx, bucket)
		if err != nil {
			return err
		}
		_, err = kv.Get(ctx, key)
		return err
	}
}

// kvPut: the peer writes an entry.
func kvPut(bucket, key string) func(context.Context, *env, *peer) error {
	return func(ctx context.Context, _ *env, p *peer) error {
		// A put is a JetStream publish on the key's subject; a handle from
		// KeyValue would need the bucket's info, which some roles that
		// write may not read.
		_, err := p.js.Publish(ctx, "$KV."+bucket+"."+key, []byte(`{"state":"permanentFailure"}`))
		return err
	}
}

// consume: the peer creates (or updates) a durable pull consumer and
// fetches and acks a message an admin published.
func consume(stream, durable, filter, sample string) func(context.Context, *env, *peer) error {
	return func(ctx context.Context, e *env, p *peer) error {
		cons, err := p.js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: durable, FilterSubject: filter,
			AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			return err
		}
		if _, err := e.admin.js.Publish(ctx, sample, []byte(`{}`)); err != nil {
			return err
		}
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(patience))
		if err != nil {
			return err
		}
		for m := range batch.Messages() {
			return m.DoubleAck(ctx)
		}
		if batch.Error() != nil {
			return batch.Error()
		}
		return errors.New("no message fetched")
	}
}

// storeThen: the peer publishes on subject and then does what then does
// with the stream and what was stored.
func storeThen(stream, subject string, then func(context.Context, jetstream.Stream, *jetstream.PubAck) error) func(context.Context, *env, *peer) error {
	return func(ctx context.Context, _ *env, p *peer) error {
		ack, err := p.js.Publish(ctx, subject, []byte(`{}`))
		if err != nil {
			return err
		}
		s, err := p.js.Stream(ctx, stream)
		if err != nil {
			return err
		}
		return then(ctx, s, ack)
	}
}

// deleteMsg: the peer publishes on subject and deletes what it stored
// from the stream.
func deleteMsg(stream, subject string) func(context.Context, *env, *peer) error {
	return storeThen(stream, subject, func(ctx context.Context, s jetstream.Stream, ack *jetstream.PubAck) error {
		return s.DeleteMsg(ctx, ack.Sequence)
	})
}

// purgeSubject: the peer publishes on subject and purges filter (which
// the stored subject matches) from the stream, and what it stored is gone.
func purgeSubject(stream, subject, filter string) func(context.Context, *env, *peer) error {
	return storeThen(stream, subject, func(ctx context.Context, s jetstream.Stream, ack *jetstream.PubAck) error {
		if err := s.Purge(ctx, jetstream.WithPurgeSubject(filter)); err != nil {
			return err
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
		if err != nil {
			return err
		}
		if len(info.State.Subjects) > 0 {
			return fmt.Errorf("after the purge of %s the stream holds %v (the message published was %d)", filter, info.State.Subjects, ack.Sequence)
		}
		return nil
	})
}

// createConsumer: the peer creates (or updates) a durable pull consumer.
func createConsumer(stream, durable, filter string) func(context.Context, *env, *peer) error {
	return func(ctx context.Context, _ *env, p *peer) error {
		_, err := p.js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: durable, FilterSubject: filter,
			AckPolicy: jetstream.AckExplicitPolicy})
		return err
	}
}

// lastFor: the peer reads a stream's last message on a subject an admin
// published to.
func lastFor(stream, subject string) func(context.Context, *env, *peer) error {
	return func(ctx context.Context, e *env, p *peer) error {
		if _, err := e.admin.js.Publish(ctx, subject, []byte(`{}`)); err != nil {
			return err
		}
		s, err := p.js.Stream(ctx, stream)
		if err != nil {
			return err
		}
		_, err = s.GetLastMsgForSubject(ctx, subject)
		return err
	}
}

// nextFor: the peer reads, by a direct get of the next message on a
// filter, a message an admin published.
func nextFor(stream, filter, subject string) func(context.Context, *env, *peer) error {
	return func(ctx context.Context, e *env, p *peer) error {
		if _, err := e.admin.js.Publish(ctx, subject, []byte(`{}`)); err != nil {
			return err
		}
		s, err := p.js.Stream(ctx, stream)
		if err != nil {
			return err
		}
		_, err = s.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(filter))
		return err
	}
}

// bySequence: the peer reads a stream's first message by sequence.
func bySequence(stream, sample string) func(context.Context, *env, *peer) error {
	return func(ctx context.Context, e *env, p *peer) error {
		ack, err := e.admin.js.Publish(ctx, sample, []byte(`{}`))
		if err != nil {
			return err
		}
		s, err := p.js.Stream(ctx, stream)
		if err != nil {
			return err
		}
		_, err = s.GetMsg(ctx, ack.Sequence)
		return err
	}
}

// backlog: the peer reads a stream's info and the info of a durable
// consumer an admin made on it, and sees the message waiting there. The
// server counts a consumer's pending messages on its own goroutine, after
// the publish is acknowledged: under load an info read at once can come
// before it, so the peer reads again until it sees the message or ctx
// ends.
func backlog(stream, durable, filter, sample string) func(context.Context, *env, *peer) error {
	return func(ctx context.Context, e *env, p *peer) error {
		if _, err := e.admin.js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: durable, FilterSubject: filter,
			AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			return err
		}
		if _, err := e.admin.js.Publish(ctx, sample, []byte(`{}`)); err != nil {
			return err
		}
		s, err := p.js.Stream(ctx, stream)
		if err != nil {
			return err
		}
		if s.CachedInfo().State.Msgs == 0 {
			return fmt.Errorf("stream %s: no message in its info", stream)
		}
		for {
			c, err := p.js.Consumer(ctx, stream, durable)
			if err != nil {
				return err
			}
			if c.CachedInfo().NumPending > 0 {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("consumer %s: no backlog in its info", durable)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

// declareStream: the peer updates a stream's configuration.
func declareStream(name string) func(context.Context, *env, *peer) error {
	return func(ctx context.Context, e *env, p *peer) error {
		s, err := e.admin.js.Stream(ctx, name)
		if err != nil {
			return err
		}
		_, err = p.js.UpdateStream(ctx, s.CachedInfo().Config)
		return err
	}
}

// The permission matrix of every role against a real server: what a role
// needs works, and a sample of what it must not do is refused with a
// permissions violation.
func TestRolePermissions(t *testing.T) {
	cfg, seeds := bustest.StartAuth(t)
	e := &env{cfg: cfg, seeds: seeds}
	e.admin = connectAs(t, cfg, seeds, bus.RoleAdmin)

	p1 := bus.PartitionOf("p1", bus.DefaultPartitions) // the partition of plan p1's messages
	matrix := map[bus.Role][]check{
		bus.RoleClient: {
			allow("request a plan", request(bus.SubjectPlanRequest)),
			allow("reset a session", request(bus.SubjectSessionReset)),
			allow("list skills", request(bus.SubjectSkills)),
			allow("call a reserved endpoint", request(bus.SubjectGuideTurn)),
			allow("cancel a request", request(bus.SubjectPlanCancel)),
			allow("list requests", request(bus.SubjectPlanList)),
			allow("approve or reject a tool", request(bus.SubjectPlanApprove)),
			allow("read past events by subject", nextFor(bus.StreamEvents, bus.EventsOfRequest("r4"), bus.EventSubject("r4", "plan.started"))),
			allow("read a queued request by subject", lastFor(bus.StreamRequests, bus.RequestSubject("r5"))),
			allow("discover services", request("$SRV.PING."+bus.ServicePlanner)),
			allow("watch events", subscribe(bus.SubjectEventsAll, bus.EventSubject("r1", "tool.started"))),
			allow("watch outcomes", subscribe(bus.OutcomeSubject("r1"), bus.OutcomeSubject("r1"))),
			allow("read an outcome by subject", lastFor(bus.StreamOutcomes, bus.OutcomeSubject("r2"))),
			allow("read an execution by subject", lastFor(bus.StreamExecutions, bus.ExecutionSubject("p2"))),
			allow("read health", kvGet(bus.BucketHealth, "s1.echo")),
			allow("read a request's loop", kvGet(bus.BucketRequests, "r1")),
			allow("read a plan's state", kvGet(bus.BucketPlans, bus.StateKey("p1"))),
			allow("read a session", kvGet(bus.BucketSessions, "s1")),
			allow("read a manifest", kvGet(bus.BucketSkills, "echo")),
			allow("start an agent", request(bus.SubjectAgentStart)),
			allow("read an agent's state", kvGet(bus.BucketAgents, "s1")),
			deny("wake an agent past the planner", bus.AgentSubject("s1"), jsPublish(bus.AgentSubject("s1"))),
			deny("write an agent's state", "$KV.planbus-agents.s1", kvPut(bus.BucketAgents, "s1")),
			deny("forge an agent event", bus.EventSubject("x", "agent.preempted"), publish(bus.EventSubject("x", "agent.preempted"))),
			allow("read a skill's backlog (the web view)", backlog(bus.StreamTools, bus.SkillConsumer("web"), bus.ToolSubject("web"), bus.ToolSubject("web"))),
			allow("read a backlog of the results (the web view)", backlog(bus.StreamResults, "web-backlog",
				bus.Partitioned(bus.SubjectResultsAll).Partition(bus.PartitionOf("pw", bus.DefaultPartitions)), bus.ResultSubject("pw"))),
			deny("read tool calls by sequence", "$JS.API.DIRECT.GET.PLANBUS_TOOLS", bySequence(bus.StreamTools, bus.ToolSubject("sleep"))),
			deny("read results by sequence", "$JS.API.DIRECT.GET.PLANBUS_RESULTS", bySequence(bus.StreamResults, bus.ResultSubject("p9"))),
			deny("delete a consumer", "$JS.API.CONSUMER.DELETE.PLANBUS_RESULTS.dispatcher-results",
				func(ctx context.Context, _ *env, p *peer) error {
					return p.js.DeleteConsumer(ctx, bus.StreamResults, bus.ConsumerDispatcherResults)
				}),
			deny("forge a result", bus.ResultSubject("x"), publish(bus.ResultSubject("x"))),
			deny("publish a plan", bus.PlanSubject("x"), jsPublish(bus.PlanSubject("x"))),
			deny("publish a tool call", bus.ToolSubject("echo"), jsPublish(bus.ToolSubject("echo"))),
			deny("publish a timer", bus.TimerSubject("x"), jsPublish(bus.TimerSubject("x"))),
			deny("forge a cancel", bus.CancelSubject("x"), publish(bus.CancelSubject("x"))),
			deny("queue a request past the endpoint", bus.RequestSubject("x"), jsPublish(bus.RequestSubject("x"))),
			deny("forge an outcome", bus.OutcomeSubject("x"), jsPublish(bus.OutcomeSubject("x"))),
			deny("forge an event", bus.EventSubject("x", "plan.succeeded"), publish(bus.EventSubject("x", "plan.succeeded"))),
			deny("write health", "$KV.planbus-health.victim.echo", kvPut(bus.BucketHealth, "victim.echo")),
			deny("write a session", "$KV.planbus-sessions.s1", kvPut(bus.BucketSessions, "s1")),
			deny("write a guided session", "$KV.planbus-guides.s1", kvPut(bus.BucketGuides, "s1")),
			deny("forge a guide event", bus.EventSubject("s1", "guide.completed"), publish(bus.EventSubject("s1", "guide.completed"))),
			deny("register a skill", "$KV.planbus-skills.evil", kvPut(bus.BucketSkills, "evil")),
			deny("read planbus-keys", "$JS.API.STREAM.INFO.KV_planbus-keys", kvGet(bus.BucketKeys, "signing")),
			deny("create a consumer", "$JS.API.CONSUMER.CREATE.PLANBUS_OUTCOMES.mine.planbus.outcomes.>",
				consume(bus.StreamOutcomes, "mine", bus.SubjectOutcomesAll, bus.OutcomeSubject("r3"))),
			deny("change a stream", "$JS.API.STREAM.UPDATE.PLANBUS_OUTCOMES", declareStream(bus.StreamOutcomes)),
			deny("invoke a skill directly", bus.InvokeSubject("shell"), request(bus.InvokeSubject("shell"))),
			deny("answer plan requests", bus.SubjectPlanRequest, respond(bus.SubjectPlanRequest)),
			deny("answer approvals", bus.SubjectPlanApprove, respond(bus.SubjectPlanApprove)),
			deny("read tool calls", bus.SubjectToolsAll, subscribe(bus.SubjectToolsAll, bus.ToolSubject("echo"))),
			deny("read a dispatcher's replies", "_INBOX_dispatcher.>", subscribe("_INBOX_dispatcher.>", "_INBOX_dispatcher.x")),
		},
		bus.RoleWorker: {
			allow("pull, ack its skill's calls", consume(bus.StreamTools, bus.SkillConsumer("echo"), bus.ToolSubject("echo"), bus.ToolSubject("echo"))),
			allow("publish a result", jsPublish(bus.ResultSubject("p1"))),
			allow("publish results in an atomic batch", batchOf(false, bus.ResultSubject("p1"), bus.ResultSubject("p2"), bus.ResultSubject("p3"))),
			allow("publish results in an atomic batch, each message acknowledged", batchOf(true, bus.ResultSubject("p1"), bus.ResultSubject("p2"))),
			allow("publish a tool event", publish(bus.EventSubject("r1", "tool.started"))),
			allow("register a manifest", kvPut(bus.BucketSkills, "echo")),
			allow("receive cancels", subscribe(bus.SubjectCancelAll, bus.CancelSubject("p1"))),
			allow("answer invoke", respond(bus.InvokeSubject("echo"))),
			allow("answer as an external planner", respond("planners.travel")),
			allow("answer discovery", respond("$SRV.PING."+bus.ServiceToolworker)),
			deny("write health", "$KV.planbus-health.victim.echo", kvPut(bus.BucketHealth, "victim.echo")),
			deny("write a session", "$KV.planbus-sessions.s1", kvPut(bus.BucketSessions, "s1")),
			deny("read planbus-keys", "$JS.API.STREAM.INFO.KV_planbus-keys", kvGet(bus.BucketKeys, "signing")),
			deny("read tool calls by sequence", "$JS.API.DIRECT.GET.PLANBUS_TOOLS", bySequence(bus.StreamTools, bus.ToolSubject("sleep"))),
			deny("publish a tool call", bus.ToolSubject("shell"), jsPublish(bus.ToolSubject("shell"))),
			deny("publish a plan", bus.PlanSubject("x"), jsPublish(bus.PlanSubject("x"))),
			deny("forge a cancel", bus.CancelSubject("x"), publish(bus.CancelSubject("x"))),
			deny("forge a plan event", bus.EventSubject("x", "plan.succeeded"), publish(bus.EventSubject("x", "plan.succeeded"))),
			deny("write a guided session", "$KV.planbus-guides.s1", kvPut(bus.BucketGuides, "s1")),
			deny("request a plan", bus.SubjectPlanRequest, request(bus.SubjectPlanRequest)),
			deny("read other results", bus.SubjectResultsAll, subscribe(bus.SubjectResultsAll, bus.ResultSubject("p1"))),
			deny("consume results", "$JS.API.CONSUMER.CREATE.PLANBUS_RESULTS.dispatcher-results.planbus.results.>",
				consume(bus.StreamResults, bus.ConsumerDispatcherResults, bus.SubjectResultsAll, bus.ResultSubject("p1"))),
			deny("change a stream", "$JS.API.STREAM.UPDATE.PLANBUS_TOOLS", declareStream(bus.StreamTools)),
			deny("read a client's replies", "_INBOX.>", subscribe("_INBOX.>", "_INBOX.x")),
		},
		bus.RoleDispatcher: {
			allow("consume plans", consume(bus.StreamPlans, bus.PartitionConsumer(bus.ConsumerDispatcherPlans, p1),
				bus.Partitioned(bus.SubjectPlansAll).Partition(p1), bus.PlanSubject("p1"))),
			allow("consume results", consume(bus.StreamResults, bus.PartitionConsumer(bus.ConsumerDispatcherResults, p1),
				bus.Partitioned(bus.SubjectResultsAll).Partition(p1), bus.ResultSubject("p1"))),
			allow("consume timers", consume(bus.StreamTimers, bus.PartitionConsumer(bus.ConsumerDispatcherTimers, p1),
				bus.Partitioned(bus.SubjectTimersAll).Partition(p1), bus.TimerSubject("p1"))),
			allow("consume results stored before partitions", createConsumer(bus.StreamResults, bus.ConsumerDispatcherResults,
				bus.Partitioned(bus.SubjectResultsAll).Published())),
			allow("find the other dispatchers", publish("$SRV.PING."+bus.ServiceDispatcher)),
			allow("purge an ended plan's timers", purgeSubject(bus.StreamTimers, bus.TimerSubject("p1"),
				bus.Partitioned(bus.SubjectTimersAll).Of("p1"))),
			allow("keep a message in the tool queue and purge the ones before", purgeSubject(bus.StreamTools, bus.KeeperSubject, bus.KeeperSubject)),
			deny("delete a message by its sequence (a server back from a crash may have given it to another)",
				"$JS.API.STREAM.MSG.DELETE.PLANBUS_TOOLS", deleteMsg(bus.StreamTools, bus.KeeperSubject)),
			deny("consume the results of every partition at once", "$JS.API.CONSUMER.CREATE.PLANBUS_RESULTS.all.planbus.results.>",
				createConsumer(bus.StreamResults, "all", bus.SubjectResultsAll)),
			allow("read a result by sequence", bySequence(bus.StreamResults, bus.ResultSubject("p2"))),
			allow("release a tool call", jsPublish(bus.ToolSubject("echo"))),
			allow("publish a timer", jsPublish(bus.TimerSubject("p1"))),
			allow("publish an execution result", jsPublish(bus.ExecutionSubject("p1"))),
			allow("cancel a plan's calls", publish(bus.CancelSubject("p1"))),
			allow("publish a plan event", publish(bus.EventSubject("r1", "plan.succeeded"))),
			allow("write health", kvPut(bus.BucketHealth, "s1.echo")),
			allow("write plan state", kvPut(bus.BucketPlans, bus.StateKey("p1"))),
			allow("read the signing key", kvGet(bus.BucketKeys, "signing")),
			allow("write the signing key", kvPut(bus.BucketKeys, "signing")),
			allow("declare a stream", declareStream(bus.StreamPlans)),
			allow("answer status", respond(bus.SubjectDispatcherStatus)),
			allow("read a skill's backlog (metrics)", backlog(bus.StreamTools, bus.SkillConsumer("metrics"), bus.ToolSubject("metrics"), bus.ToolSubject("metrics"))),
			allow("ask the tool workers who they are (metrics)", request("$SRV.INFO."+bus.ServiceToolworker)),
			deny("ask the planners' info", "$SRV.INFO."+bus.ServicePlanner, request("$SRV.INFO."+bus.ServicePlanner)),
			deny("forge a result", bus.ResultSubject("x"), jsPublish(bus.ResultSubject("x"))),
			deny("publish an outcome", bus.OutcomeSubject("x"), jsPublish(bus.OutcomeSubject("x"))),
			deny("write a request's loop", "$KV.planbus-requests.r1", kvPut(bus.BucketRequests, "r1")),
			deny("write an agent's state", "$KV.planbus-agents.s1", kvPut(bus.BucketAgents, "s1")),
			deny("answer plan requests", bus.SubjectPlanRequest, respond(bus.SubjectPlanRequest)),
			deny("read tool calls", bus.SubjectToolsAll, subscribe(bus.SubjectToolsAll, bus.ToolSubject("echo"))),
			deny("read a client's replies", "_INBOX.>", subscribe("_INBOX.>", "_INBOX.x")),
		},
		bus.RolePlanner: {
			allow("answer plan requests", respond(bus.SubjectPlanRequest)),
			allow("queue a request", jsPublish(bus.RequestSubject("r1"))),
			allow("publish a plan", jsPublish(bus.PlanSubject("r1-1"))),
			allow("publish an outcome", jsPublish(bus.OutcomeSubject("r1"))),
			allow("consume requests", consume(bus.StreamRequests, bus.ConsumerPlannerRequests, bus.SubjectRequestsAll, bus.RequestSubject("r2"))),
			allow("write a request's loop", kvPut(bus.BucketRequests, "r1")),
			allow("reset health", kvPut(bus.BucketHealth, "s1.echo")),
			allow("hand dispatchers a cancel", jsPublish(bus.TimerSubject("r1-1"))),
			allow("list requests by sequence", bySequence(bus.StreamRequests, bus.RequestSubject("r6"))),
			allow("read a plan's state", kvGet(bus.BucketPlans, bus.StateKey("p1"))),
			allow("answer cancels", respond(bus.SubjectPlanCancel)),
			allow("answer lists", respond(bus.SubjectPlanList)),
			allow("answer guided turns", respond(bus.SubjectGuideTurn)),
			allow("write a guided session", kvPut(bus.BucketGuides, "s1")),
			allow("read a guided session", kvGet(bus.BucketGuides, "s2")),
			allow("publish a guide event", publish(bus.EventSubject("s1", "guide.advanced"))),
			allow("answer approvals", respond(bus.SubjectPlanApprove)),
			allow("hand dispatchers a decision", jsPublish(bus.TimerSubject("r1-2"))),
			allow("ask an external planner", request("planners.travel")),
			allow("declare a stream", declareStream(bus.StreamRequests)),
			allow("answer the agent endpoints", respond(bus.SubjectAgentStop)),
			allow("wake an agent", jsPublish(bus.AgentSubject("s1"))),
			allow("consume agent wake-ups", consume(bus.StreamAgents, bus.ConsumerPlannerAgents, bus.SubjectAgentsAll, bus.AgentSubject("s2"))),
			allow("consume session changes", consume(bus.SessionsStream, bus.ConsumerPlannerSessions, bus.SessionChanges, "$KV.planbus-sessions.s3")),
			allow("write an agent's state", kvPut(bus.BucketAgents, "s1")),
			allow("publish an agent event", publish(bus.EventSubject("r1", "agent.goal.selected"))),
			deny("ask any other subject", "elsewhere.x", request("elsewhere.x")),
			deny("read planbus-keys", "$JS.API.STREAM.INFO.KV_planbus-keys", kvGet(bus.BucketKeys, "signing")),
			deny("change planbus-keys", "$JS.API.STREAM.UPDATE.KV_planbus-keys", declareStream("KV_"+bus.BucketKeys)),
			deny("publish a tool call", bus.ToolSubject("echo"), jsPublish(bus.ToolSubject("echo"))),
			deny("forge a result", bus.ResultSubject("x"), jsPublish(bus.ResultSubject("x"))),
			deny("forge a cancel", bus.CancelSubject("x"), publish(bus.CancelSubject("x"))),
			deny("write plan state", "$KV.planbus-plans.p1.state", kvPut(bus.BucketPlans, bus.StateKey("p1"))),
			deny("read a dispatcher's replies", "_INBOX_dispatcher.>", subscribe("_INBOX_dispatcher.>", "_INBOX_dispatcher.x")),
		},
		bus.RoleAdmin: {
			allow("read the signing key", kvGet(bus.BucketKeys, "signing")),
			allow("publish a result", jsPublish(bus.ResultSubject("p1"))),
			allow("change a stream", declareStream(bus.StreamTools)),
			allow("invoke a skill directly", request(bus.InvokeSubject("echo"))),
			allow("read anything", subscribe(">", "anything.at.all")),
			// Its replies would go where every client reads them.
			deny("take replies on the client's shared inbox", "_INBOX.x", subscribe("_INBOX.x", "_INBOX.x")),
		},
	}
	for _, role := range bus.Roles() {
		checks := matrix[role]
		if len(checks) == 0 {
			t.Errorf("role %s has no checks", role)
		}
		for _, c := range checks {
			t.Run(string(role)+"/"+c.name, func(t *testing.T) {
				c.run(t, e, connectAs(t, cfg, seeds, role))
			})
		}
	}
}

// run carries out the check as p: an allowed operation must work without
// an error, a denied one must get a permissions violation on its subject.
func (c check) run(t *testing.T, e *env, p *peer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if c.allowed {
		if err := c.op(ctx, e, p); err != nil {
			t.Fatalf("refused: %v", err)
		}
		select {
		case err := <-p.errs:
			t.Fatalf("allowed, with an error: %v", err)
		default:
		}
		return
	}
	done := make(chan error, 1)
	go func() { done <- c.op(ctx, e, p) }()
	if err := p.violation(c.subject); err != nil {
		t.Error(err)
	}
	cancel()
	<-done
}

// A worker group holds the worker role's grants for its skills alone: it
// takes their calls, advertises their manifests and answers their
// invocations, and may touch no other skill's.
func TestWorkerGroupPermissions(t *testing.T) {
	cfg, seeds := bustest.StartAuth(t, bus.WorkerGroup{Name: "echoers", Skills: []string{"echo", "sleep"}})
	e := &env{cfg: cfg, seeds: seeds}
	e.admin = connectAs(t, cfg, seeds, bus.RoleAdmin)
	if g := seeds.Groups(); len(g) != 1 || g[0].Name != "echoers" || !strings.HasPrefix(g[0].PublicKey, "U") {
		t.Fatalf("groups %+v", g)
	}
	other := "$JS.API.CONSUMER.MSG.NEXT." + bus.StreamTools + "." + bus.SkillConsumer("shell")
	for _, c := range []check{
		allow("pull, ack its skill's calls", consume(bus.StreamTools, bus.SkillConsumer("echo"), bus.ToolSubject("echo"), bus.ToolSubject("echo"))),
		allow("pull its other skill's calls", consume(bus.StreamTools, bus.SkillConsumer("sleep"), bus.ToolSubject("sleep"), bus.ToolSubject("sleep"))),
		allow("register its manifest", kvPut(bus.BucketSkills, "echo")),
		allow("read the manifests advertised", kvGet(bus.BucketSkills, "shell")),
		allow("answer its invocations", respond(bus.InvokeSubject("sleep"))),
		allow("publish a result", jsPublish(bus.ResultSubject("p1"))),
		allow("publish results in an atomic batch", batchOf(false, bus.ResultSubject("p1"), bus.ResultSubject("p2"))),
		allow("publish a tool event", publish(bus.EventSubject("r1", "tool.started"))),
		allow("receive cancels", subscribe(bus.SubjectCancelAll, bus.CancelSubject("p1"))),
		allow("answer discovery", respond("$SRV.PING."+bus.ServiceToolworker)),
		deny("take another skill's calls", "$JS.API.CONSUMER.CREATE.PLANBUS_TOOLS.skill-shell.planbus.tools.shell",
			createConsumer(bus.StreamTools, bus.SkillConsumer("shell"), bus.ToolSubject("shell"))),
		deny("take every skill's calls", "$JS.API.CONSUMER.CREATE.PLANBUS_TOOLS.all.planbus.tools.>",
			createConsumer(bus.StreamTools, "all", bus.SubjectToolsAll)),
		deny("pull from another skill's consumer", other, pullFrom(bus.StreamTools, bus.SkillConsumer("shell"), bus.ToolSubject("shell"))),
		deny("rewrite another skill's manifest", "$KV.planbus-skills.shell", kvPut(bus.BucketSkills, "shell")),
		deny("answer another skill's invocations", bus.InvokeSubject("shell"), respond(bus.InvokeSubject("shell"))),
		deny("read other results", bus.SubjectResultsAll, subscribe(bus.SubjectResultsAll, bus.ResultSubject("p1"))),
		deny("write health", "$KV.planbus-health.victim.echo", kvPut(bus.BucketHealth, "victim.echo")),
		// A plan it answered as an external planner could call any skill.
		deny("answer as an external planner", "planners.travel", respond("planners.travel")),
	} {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, e, connectWith(t, cfg, seeds.GroupFile("echoers"), bus.RoleWorker))
		})
	}
}

// pullFrom: the peer asks for the next message of a consumer an admin
// made.
func pullFrom(stream, durable, filter string) func(context.Context, *env, *peer) error {
	return func(ctx context.Context, e *env, p *peer) error {
		if _, err := e.admin.js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: durable, FilterSubject: filter,
			AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			return err
		}
		_, err := p.nc.Request("$JS.API.CONSUMER.MSG.NEXT."+stream+"."+durable, []byte(`{"batch":1,"no_wait":true}`), patience)
		return err
	}
}

// Without a seed, or with a seed the server does not know, nobody gets in.
func TestAuthRefusesConnectionsWithoutARoleSeed(t *testing.T) {
	cfg, _ := bustest.StartAuth(t)
	if _, err := nats.Connect(cfg.URL); !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("without a seed: %v, want an authorization error", err)
	}
	stranger, _ := bus.EnsureSeeds(t.TempDir())
	opt, _ := nats.NkeyOptionFromSeed(stranger.File(bus.RoleAdmin))
	if _, err := nats.Connect(cfg.URL, opt); !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("with another server's admin seed: %v, want an authorization error", err)
	}
}
