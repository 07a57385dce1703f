package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
)

// source reads the system as the client role may: the planner's
// endpoints through the client, buckets by key, streams by subject, micro
// services' discovery, and stream and consumer info. It creates no
// consumer.
type source struct {
	nc *nats.Conn
	js jetstream.JetStream
	cl *client.Client
	// discovery is how long a scatter-gather request to the micro
	// services collects answers.
	discovery time.Duration
}

// planDef is a stored plan, as the dispatcher validated it (defaults
// filled in): what the view draws and shows of each tool. It reads the
// wire format (schemas/plan.schema.json) rather than an internal type.
type planDef struct {
	PlanID      string    `json:"planId"`
	RequestID   string    `json:"requestId"`
	SessionID   string    `json:"sessionId"`
	Description string    `json:"description"`
	TimeoutMs   int64     `json:"timeoutMs"`
	Tools       []toolDef `json:"tools"`
}

type toolDef struct {
	ToolID       string                  `json:"toolId"`
	Skill        string                  `json:"skill"`
	Description  string                  `json:"description"`
	Input        json.RawMessage         `json:"input"`
	Dependencies []string                `json:"dependencies"`
	Required     *bool                   `json:"required"`
	TimeoutMs    int64                   `json:"timeoutMs"`
	RetryPolicy  *planbus.RetryPolicy    `json:"retryPolicy"`
	Fallback     *struct{ Skill string } `json:"fallback"`
}

// required: a tool is required unless it says otherwise.
func (t toolDef) required() bool { return t.Required == nil || *t.Required }

// errNotFound: nothing has the id.
var errNotFound = errors.New("web: not found")

// kvGet reads key from bucket; a missing key is errNotFound.
func (s *source) kvGet(ctx context.Context, bucket, key string) (jetstream.KeyValueEntry, error) {
	kv, err := s.js.KeyValue(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("web: bucket %s: %w", bucket, err)
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: %s has no %s", errNotFound, bucket, key)
	}
	if err != nil {
		return nil, fmt.Errorf("web: %s %s: %w", bucket, key, err)
	}
	return e, nil
}

// plan reads a plan's definition.
func (s *source) plan(ctx context.Context, planID string) (*planDef, error) {
	e, err := s.kvGet(ctx, bus.BucketPlans, bus.PlanKey(planID))
	if err != nil {
		return nil, err
	}
	var p planDef
	if err := json.Unmarshal(e.Value(), &p); err != nil {
		return nil, fmt.Errorf("web: plan %s: %w", planID, err)
	}
	if p.PlanID == "" {
		p.PlanID = planID
	}
	return &p, nil
}

// maxPastEvents bounds the events read back for one page: a plan of
// 10,000 tools makes about 30,000.
const maxPastEvents = 50_000

// events reads the request's events kept in the EVENTS stream (an hour),
// in the order they were stored, those of planID only when it is given,
// by direct gets of the next message on the request's subjects.
func (s *source) events(ctx context.Context, requestID, planID string) ([]planbus.Event, error) {
	st, err := s.js.Stream(ctx, bus.StreamEvents)
	if err != nil {
		return nil, fmt.Errorf("web: stream %s: %w", bus.StreamEvents, err)
	}
	var out []planbus.Event
	filter := bus.EventsOfRequest(requestID)
	for seq, n := uint64(1), 0; n < maxPastEvents; n++ {
		m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return out, fmt.Errorf("web: events of %s: %w", requestID, err)
		}
		seq = m.Sequence + 1
		var ev planbus.Event
		if json.Unmarshal(m.Data, &ev) != nil || (planID != "" && ev.PlanID != planID) {
			continue
		}
		out = append(out, ev)
	}
	return out, nil
}

// execution reads a plan's execution result; nil while it runs.
func (s *source) execution(ctx context.Context, planID string) (*planbus.ExecutionResult, error) {
	st, err := s.js.Stream(ctx, bus.StreamExecutions)
	if err != nil {
		return nil, fmt.Errorf("web: stream %s: %w", bus.StreamExecutions, err)
	}
	m, err := st.GetLastMsgForSubject(ctx, bus.ExecutionSubject(planID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("web: execution result of %s: %w", planID, err)
	}
	var res planbus.ExecutionResult
	if err := json.Unmarshal(m.Data, &res); err != nil {
		return nil, fmt.Errorf("web: execution result of %s: %w", planID, err)
	}
	return &res, nil
}

// healthEntry is one stored value of a skill's health in a session.
type healthEntry struct {
	Time      time.Time
	Operation string // put, or del/purge for a session reset
	State     string
	Failures  int
	LastError string
}

// healthHistory reads the values of <session>.<skill> that the health
// bucket keeps (its history), oldest first.
func (s *source) healthHistory(ctx context.Context, session, skill string) ([]healthEntry, error) {
	st, err := s.js.Stream(ctx, "KV_"+bus.BucketHealth)
	if err != nil {
		return nil, fmt.Errorf("web: bucket %s: %w", bus.BucketHealth, err)
	}
	subject := "$KV." + bus.BucketHealth + "." + bus.HealthKey(session, skill)
	var out []healthEntry
	for seq, n := uint64(1), 0; n < 64; n++ {
		m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return out, fmt.Errorf("web: health of %s in %s: %w", skill, session, err)
		}
		seq = m.Sequence + 1
		e := healthEntry{Time: m.Time, Operation: "put"}
		if op := m.Header.Get("KV-Operation"); op != "" {
			e.Operation = strings.ToLower(op)
		}
		var rec struct {
			State     string `json:"state"`
			Failures  int    `json:"failures"`
			LastError string `json:"lastError"`
		}
		if json.Unmarshal(m.Data, &rec) == nil {
			e.State, e.Failures, e.LastError = rec.State, rec.Failures, rec.LastError
		}
		out = append(out, e)
	}
	return out, nil
}

// skillsReply is the planner's answer on planbus.skills.
type skillsReply struct {
	SessionID string `json:"sessionId"`
	Skills    []struct {
		Manifest planbus.SkillManifest `json:"manifest"`
		Health   struct {
			State     string `json:"state"`
			Failures  int    `json:"failures"`
			LastError string `json:"lastError"`
		} `json:"health"`
	} `json:"skills"`
}

// skills asks the planner for the advertised skills and their health in
// a session.
func (s *source) skills(ctx context.Context, session string) (*skillsReply, error) {
	body, _ := json.Marshal(map[string]string{"sessionId": session})
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m, err := s.nc.RequestWithContext(rctx, bus.SubjectSkills, body)
	if err != nil {
		return nil, fmt.Errorf("web: no planner answered on %s: %w", bus.SubjectSkills, err)
	}
	if msg := m.Header.Get("Nats-Service-Error"); msg != "" {
		return nil, fmt.Errorf("web: %s: %s", bus.SubjectSkills, msg)
	}
	var r skillsReply
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return nil, fmt.Errorf("web: %s: %w", bus.SubjectSkills, err)
	}
	return &r, nil
}

// instance is one running instance of a micro service: what $SRV.INFO
// and $SRV.STATS say of it.
type instance struct {
	Name        string            `json:"name"`
	ID          string            `json:"id"`
	Version     string            `json:"version"`
	Description string            `json:"description"`
	Metadata    map[string]string `json:"metadata"`
	Endpoints   []struct {
		Name     string            `json:"name"`
		Subject  string            `json:"subject"`
		Metadata map[string]string `json:"metadata"`
	} `json:"endpoints"`
	Started time.Time
	// Stats are the endpoints' counters and the service's own data, as
	// $SRV.STATS returns them.
	Stats struct {
		Started   time.Time `json:"started"`
		Endpoints []struct {
			Name         string          `json:"name"`
			Requests     int64           `json:"num_requests"`
			Errors       int64           `json:"num_errors"`
			ProcessingNs int64           `json:"processing_time"`
			AverageNs    int64           `json:"average_processing_time"`
			Data         json.RawMessage `json:"data"`
			LastError    string          `json:"last_error"`
		} `json:"endpoints"`
	}
}

// Data is the service's own statistics (the first endpoint's data: every
// planbus service returns the same from each endpoint).
func (in instance) Data() map[string]any {
	for _, e := range in.Stats.Endpoints {
		var m map[string]any
		if json.Unmarshal(e.Data, &m) == nil && len(m) > 0 {
			return m
		}
	}
	return nil
}

// Worker is the worker id a planbus service names in its metadata.
func (in instance) Worker() string {
	for _, k := range []string{"worker", "dispatcher", "planner"} {
		if v := in.Metadata[k]; v != "" {
			return v
		}
	}
	return in.ID
}

// services finds every instance of the micro service name: a request on
// $SRV.INFO.<name> and $SRV.STATS.<name>, whose answers are collected for
// s.discovery (every instance answers; nobody says how many there are).
func (s *source) services(ctx context.Context, name string) ([]instance, error) {
	infos, err := s.gather(ctx, "$SRV.INFO."+name)
	if err != nil {
		return nil, err
	}
	stats, err := s.gather(ctx, "$SRV.STATS."+name)
	if err != nil {
		return nil, err
	}
	byID := map[string]*instance{}
	var out []*instance
	for _, b := range infos {
		var in instance
		if json.Unmarshal(b, &in) != nil || in.ID == "" {
			continue
		}
		if byID[in.ID] == nil {
			byID[in.ID] = &in
			out = append(out, &in)
		}
	}
	for _, b := range stats {
		var st struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(b, &st) != nil {
			continue
		}
		if in := byID[st.ID]; in != nil {
			_ = json.Unmarshal(b, &in.Stats)
			in.Started = in.Stats.Started
		}
	}
	res := make([]instance, len(out))
	for i, in := range out {
		res[i] = *in
	}
	sort.Slice(res, func(i, j int) bool { return res[i].Worker() < res[j].Worker() })
	return res, nil
}

// gather sends a request on subject and collects every answer that
// arrives within s.discovery.
func (s *source) gather(ctx context.Context, subject string) ([][]byte, error) {
	inbox := s.nc.NewRespInbox()
	ch := make(chan *nats.Msg, 1024)
	sub, err := s.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, fmt.Errorf("web: %s: %w", subject, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := s.nc.PublishRequest(subject, inbox, nil); err != nil {
		return nil, fmt.Errorf("web: %s: %w", subject, err)
	}
	t := time.NewTimer(s.discovery)
	defer t.Stop()
	var out [][]byte
	for {
		select {
		case m := <-ch:
			out = append(out, m.Data)
		case <-t.C:
			return out, nil
		case <-ctx.Done():
			return out, ctx.Err()
		}
	}
}

// backlog is a stream's or a consumer's size and backlog.
type backlog struct {
	Stream   string
	Consumer string
	Messages uint64
	Bytes    uint64
	// Pending: messages the consumer has not been given yet; AckPending:
	// given and not acknowledged; Redelivered: given more than once.
	Pending     uint64
	AckPending  int
	Redelivered int
	Waiting     int
	// Partitions: the backlog includes that of Consumer-0, Consumer-1...,
	// the consumers of a dispatcher stream's partitions.
	Partitions int
	Err        string
}

// backlogs reads the info of every planbus stream and of the durable
// consumers named: the dispatchers', the planners' and each skill's.
func (s *source) backlogs(ctx context.Context, skills []string) (streams, consumers []backlog) {
	for _, sc := range (bus.Config{}).Streams() {
		b := backlog{Stream: sc.Name}
		st, err := s.js.Stream(ctx, sc.Name)
		if err != nil {
			b.Err = err.Error()
		} else {
			info := st.CachedInfo()
			b.Messages, b.Bytes = info.State.Msgs, info.State.Bytes
		}
		streams = append(streams, b)
	}
	type named struct{ stream, consumer string }
	list := []named{
		{bus.StreamPlans, bus.ConsumerDispatcherPlans}, {bus.StreamResults, bus.ConsumerDispatcherResults},
		{bus.StreamTimers, bus.ConsumerDispatcherTimers}, {bus.StreamRequests, bus.ConsumerPlannerRequests},
		{bus.StreamExecutions, bus.ConsumerPlannerExecutions},
	}
	for _, sk := range skills {
		list = append(list, named{bus.StreamTools, bus.SkillConsumer(sk)})
	}
	for i, n := range list {
		b := backlog{Stream: n.stream, Consumer: n.consumer}
		c, err := s.js.Consumer(ctx, n.stream, n.consumer)
		if err != nil {
			b.Err = err.Error()
			if errors.Is(err, jetstream.ErrConsumerNotFound) {
				b.Err = "not created yet"
			}
		} else {
			b.add(c.CachedInfo())
		}
		if i < 3 {
			// A dispatcher stream: its partitions' consumers count too.
			s.addPartitions(ctx, &b)
		}
		consumers = append(consumers, b)
	}
	return streams, consumers
}

// add counts a consumer's backlog in b.
func (b *backlog) add(info *jetstream.ConsumerInfo) {
	b.Pending += info.NumPending
	b.AckPending += info.NumAckPending
	b.Redelivered += info.NumRedelivered
	b.Waiting += info.NumWaiting
}

// addPartitions adds to b, the backlog of a dispatcher stream's shared
// consumer, those of the consumers of its partitions, as many as there
// are (bus.PartitionConsumer), and names them in b.Consumer.
func (s *source) addPartitions(ctx context.Context, b *backlog) {
	k := 0
	for ; k < bus.MaxPartitions; k++ {
		c, err := s.js.Consumer(ctx, b.Stream, bus.PartitionConsumer(b.Consumer, k))
		if err != nil {
			break
		}
		b.add(c.CachedInfo())
	}
	if k > 0 {
		b.Partitions = k
		b.Err = ""
	}
}

// sessions lists the sessions of recent requests, most recent first,
// "default" included.
func sessionsOf(reqs []planbus.RequestSummary) []string {
	out := []string{}
	for _, r := range reqs {
		if r.SessionID != "" && !slices.Contains(out, r.SessionID) {
			out = append(out, r.SessionID)
		}
	}
	if !slices.Contains(out, planbus.DefaultSession) {
		out = append(out, planbus.DefaultSession)
	}
	return out
}
