package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/embedded"
	"github.com/planbus/planbus/schemas"
)

func TestDeclareIsIdempotent(t *testing.T) {
	cfg := bustest.Start(t)
	c := bustest.Dial(t, cfg)
	ctx := context.Background()
	if err := c.Declare(ctx); err != nil {
		t.Fatalf("second declare: %v", err)
	}
	for _, sc := range cfg.Streams() {
		s, err := c.JS.Stream(ctx, sc.Name)
		if err != nil {
			t.Fatalf("stream %s: %v", sc.Name, err)
		}
		if got := s.CachedInfo().Config.Subjects; len(got) != 1 || got[0] != sc.Subjects[0] {
			t.Errorf("stream %s subjects = %v, want %v", sc.Name, got, sc.Subjects)
		}
	}
	for _, kc := range cfg.Buckets() {
		if _, err := c.JS.KeyValue(ctx, kc.Bucket); err != nil {
			t.Errorf("bucket %s: %v", kc.Bucket, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg   bus.Config
		field string
	}{
		{bus.Config{Listen: "nohostport"}, "Listen"},
		{bus.Config{Listen: ":4222"}, "Listen"},
		{bus.Config{CredsFile: "/does/not/exist.creds"}, "CredsFile"},
		{bus.Config{Replicas: 7}, "Replicas"},
		{bus.Config{Retention: time.Second}, "Retention"},
		{bus.Config{Retention: 90 * time.Second}, "Retention"}, // no plan would fit a minute before expiry
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if !errors.Is(err, bus.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("Validate(%+v) = %v, want an error naming %s", tt.cfg, err, tt.field)
		}
	}
}

func TestDialGivesUpWithContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	// Port 1 on loopback: nothing listens there.
	_, err := bus.Dial(ctx, bus.Config{URL: "nats://127.0.0.1:1"}, zerolog.Nop())
	if err == nil {
		t.Fatal("dial to a closed port succeeded")
	}
}

// An events stream from before events moved to memory is replaced, not an
// error.
func TestDeclareReplacesAFileBackedEventsStream(t *testing.T) {
	cfg := bustest.Start(t)
	c := bustest.Dial(t, cfg)
	ctx := context.Background()
	if err := c.JS.DeleteStream(ctx, bus.StreamEvents); err != nil {
		t.Fatal(err)
	}
	if _, err := c.JS.CreateStream(ctx, jetstream.StreamConfig{Name: bus.StreamEvents, Subjects: []string{bus.SubjectEventsAll},
		Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	if err := c.Declare(ctx); err != nil {
		t.Fatalf("declare over a file-backed events stream: %v", err)
	}
	s, err := c.JS.Stream(ctx, bus.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.Storage; got != jetstream.MemoryStorage {
		t.Errorf("events storage %v, want memory", got)
	}
}

func TestParseSync(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want bus.Sync
		ok   bool
	}{
		{"always", bus.Sync{Always: true}, true},
		{"1s", bus.Sync{Interval: time.Second}, true},
		{"2m", bus.Sync{Interval: 2 * time.Minute}, true},
		{"0s", bus.Sync{}, false},
		{"-1s", bus.Sync{}, false},
		{"sometimes", bus.Sync{}, false},
		{"", bus.Sync{}, false},
	} {
		got, err := bus.ParseSync(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseSync(%q) = %+v, %v; want %+v, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
		if back, err := bus.ParseSync(got.String()); tt.ok && (err != nil || back != got) {
			t.Errorf("ParseSync(%q).String() = %q, which reads back as %+v, %v", tt.in, got.String(), back, err)
		}
	}
}

// The retention is what every finished plan's stream and bucket keeps; a
// shorter one given to a running system takes effect at the next declare.
func TestRetentionSetsStreamsAndBuckets(t *testing.T) {
	cfg := bustest.Start(t)
	c := bustest.Dial(t, cfg)
	ctx := context.Background()
	c.Config.Retention = 10 * time.Minute
	if err := c.Declare(ctx); err != nil {
		t.Fatalf("declare with a 10m retention: %v", err)
	}
	// Shorter than the default de-duplication window, which follows it.
	short := bus.Config{Retention: 2 * time.Minute}.Defaults()
	if short.DuplicateWindow != 2*time.Minute {
		t.Errorf("a 2m retention keeps message ids %s, want 2m", short.DuplicateWindow)
	}
	for _, name := range []string{bus.StreamPlans, bus.StreamResults, bus.StreamExecutions, bus.StreamTools, bus.StreamOutcomes} {
		s, err := c.JS.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().Config.MaxAge; got != 10*time.Minute {
			t.Errorf("stream %s keeps messages %s, want 10m", name, got)
		}
	}
	for _, b := range []string{bus.BucketPlans, bus.BucketRequests} {
		kv, err := c.JS.KeyValue(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.TTL() != 10*time.Minute {
			t.Errorf("bucket %s keeps entries %s, want 10m", b, st.TTL())
		}
	}
	events, err := c.JS.Stream(ctx, bus.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	if got := events.CachedInfo().Config.MaxAge; got != 10*time.Minute {
		t.Errorf("events kept %s, want the retention when it is under an hour", got)
	}
}

// What costs the server memory for a while is capped: the events stream
// by its bytes, the results' message ids by a window shorter than the
// others' (a result stored twice is applied once), on a stream declared
// before with the old limits too (issue 22: memory per retained plan).
func TestMemoryBoundedStreamsAreCapped(t *testing.T) {
	cfg := bustest.Start(t)
	c := bustest.Dial(t, cfg)
	ctx := context.Background()
	// As an earlier version declared them.
	for _, sc := range c.Config.Streams() {
		switch sc.Name {
		case bus.StreamEvents:
			sc.MaxBytes = 256 << 20
		case bus.StreamResults:
			sc.Duplicates = 10 * time.Minute
		default:
			continue
		}
		if _, err := c.JS.UpdateStream(ctx, sc); err != nil {
			t.Fatalf("update %s: %v", sc.Name, err)
		}
	}
	c.Config.DuplicateWindow = 10 * time.Minute
	if err := c.Declare(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Duration{bus.StreamResults: 2 * time.Minute, bus.StreamPlans: 10 * time.Minute,
		bus.StreamTools: 10 * time.Minute, bus.StreamExecutions: 10 * time.Minute}
	for name, w := range want {
		s, err := c.JS.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().Config.Duplicates; got != w {
			t.Errorf("stream %s remembers message ids %s, want %s", name, got, w)
		}
	}
	events, err := c.JS.Stream(ctx, bus.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	if got := events.CachedInfo().Config.MaxBytes; got != 64<<20 {
		t.Errorf("events stream capped at %d bytes, want 64 MiB", got)
	}
	// A window shorter than the results' cap is the results' too.
	short := bus.Config{Retention: time.Minute}.Defaults()
	for _, sc := range short.Streams() {
		if sc.Name == bus.StreamResults && sc.Duplicates != time.Minute {
			t.Errorf("with a 1m window the results remember ids %s, want 1m", sc.Duplicates)
		}
	}
}

// Plans, results and timers are stored under their plan's partition, on a
// new stream and on one declared before streams were partitioned (and the
// tool queue of that time gains per-message TTLs); a
// plan's messages all land in one partition, and the plans spread over
// all of them.
func TestPlanStreamsArePartitionedByPlan(t *testing.T) {
	cfg := bustest.StartBare(t)
	cfg.Partitions = 4
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := bustest.Dial(t, cfg)
	// PLANBUS_TOOLS as an earlier version declared it, without per-message
	// TTLs (the dispatchers' keeper message needs them).
	tools := cfg.Streams()[1]
	if tools.Name != bus.StreamTools || !tools.AllowMsgTTL {
		t.Fatalf("stream 1 is %s, AllowMsgTTL %v", tools.Name, tools.AllowMsgTTL)
	}
	tools.AllowMsgTTL = false
	if _, err := c.JS.CreateStream(ctx, tools); err != nil {
		t.Fatal(err)
	}
	// PLANBUS_RESULTS as an earlier version declared it, holding a result.
	old := cfg.Streams()[2]
	if old.Name != bus.StreamResults {
		t.Fatalf("stream 2 is %s", old.Name)
	}
	old.SubjectTransform = nil
	if _, err := c.JS.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := c.JS.Publish(ctx, bus.ResultSubject("before"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := c.Declare(ctx); err != nil {
		t.Fatal(err)
	}
	if ts, err := c.JS.Stream(ctx, bus.StreamTools); err != nil || !ts.CachedInfo().Config.AllowMsgTTL {
		t.Fatalf("PLANBUS_TOOLS after the upgrade: %v, per-message TTLs not allowed", err)
	}
	seen := map[string]map[string]bool{} // partition token -> stream
	for i := range 40 {
		id := fmt.Sprintf("p%d", i)
		subjects := map[string]string{bus.StreamPlans: bus.PlanSubject(id), bus.StreamResults: bus.ResultSubject(id), bus.StreamTimers: bus.TimerSubject(id)}
		var part string
		for stream, subject := range subjects {
			ack, err := c.JS.Publish(ctx, subject, []byte("{}"))
			if err != nil {
				t.Fatal(err)
			}
			s, err := c.JS.Stream(ctx, stream)
			if err != nil {
				t.Fatal(err)
			}
			m, err := s.GetMsg(ctx, ack.Sequence)
			if err != nil {
				t.Fatal(err)
			}
			all := strings.TrimSuffix(strings.Split(subject, id)[0], ".")
			tokens := strings.Split(strings.TrimPrefix(m.Subject, all+"."), ".")
			if len(tokens) != 2 || tokens[1] != id || bus.PlanOfSubject(m.Subject) != id || tokens[0] != strconv.Itoa(bus.PartitionOf(id, 4)) {
				t.Fatalf("%s stored as %s, want %s.%d.%s", subject, m.Subject, all, bus.PartitionOf(id, 4), id)
			}
			if part != "" && tokens[0] != part {
				t.Fatalf("plan %s: %s in partition %s, another of its messages in %s", id, subject, tokens[0], part)
			}
			part = tokens[0]
			// Readers find a plan's messages whatever its partition.
			last, err := s.GetLastMsgForSubject(ctx, bus.Partitioned(all+".>").Of(id))
			if err != nil || last.Sequence != ack.Sequence {
				t.Fatalf("the last message of plan %s on %s: %v, %v; want sequence %d", id, stream, last, err, ack.Sequence)
			}
			if in := bus.Partitioned(all+".>").In(id, 4); in != m.Subject {
				t.Fatalf("plan %s on %s: In gives %s, stored as %s", id, stream, in, m.Subject)
			}
		}
		if seen[part] == nil {
			seen[part] = map[string]bool{}
		}
		seen[part][id] = true
	}
	if len(seen) != 4 {
		t.Errorf("40 plans fell in partitions %v, want all of 0-3", slices.Sorted(maps.Keys(seen)))
	}
	s, err := c.JS.Stream(ctx, bus.StreamResults)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := s.GetMsg(ctx, 1); err != nil || m.Subject != bus.ResultSubject("before") {
		t.Errorf("the result stored before: %v, %v", m, err)
	}
}

// With KeepOutcomeEvents the events stream keeps every event type of the
// event schema but tool.released and tool.started, and a stream declared
// with one setting takes the other at the next Declare.
func TestKeepEventsChoosesWhatTheEventsStreamKeeps(t *testing.T) {
	cfg := bustest.Start(t)
	c := bustest.Dial(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw, err := fs.ReadFile(schemas.FS(), "event.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			Type struct {
				Enum []planbus.EventType `json:"enum"`
			} `json:"type"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil || len(schema.Properties.Type.Enum) < 20 {
		t.Fatalf("event types of the schema: %v, %v", schema.Properties.Type.Enum, err)
	}
	types := schema.Properties.Type.Enum
	st, err := c.JS.Stream(ctx, bus.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	// publish sends one event of every type for request, then waits until
	// the stream has stored a last one it keeps either way: events from
	// one connection are stored in order.
	publish := func(request string) {
		t.Helper()
		for _, typ := range types {
			if err := c.NC.Publish(bus.EventSubject(request, typ), []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
		}
		last := bus.EventSubject(request+"-end", planbus.EventPlanSucceeded)
		if err := c.NC.Publish(last, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		for {
			_, err := st.GetLastMsgForSubject(ctx, last)
			if err == nil {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("the events stream did not store %s: %v", last, err)
			}
		}
	}
	kept := func(request string, typ planbus.EventType) bool {
		t.Helper()
		_, err := st.GetLastMsgForSubject(ctx, bus.EventSubject(request, typ))
		if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}

	c.Config.KeepEvents = bus.KeepOutcomeEvents
	if err := c.Declare(ctx); err != nil {
		t.Fatal(err)
	}
	publish("r1")
	for _, typ := range types {
		want := typ != planbus.EventToolReleased && typ != planbus.EventToolStarted
		if got := kept("r1", typ); got != want {
			t.Errorf("outcomes: %s kept %v, want %v", typ, got, want)
		}
	}

	c.Config.KeepEvents = bus.KeepAllEvents
	if err := c.Declare(ctx); err != nil {
		t.Fatal(err)
	}
	publish("r2")
	for _, typ := range types {
		if !kept("r2", typ) {
			t.Errorf("all: %s not kept", typ)
		}
	}
}

func TestParseKeepEvents(t *testing.T) {
	for _, s := range []string{"all", "outcomes"} {
		if k, err := bus.ParseKeepEvents(s); err != nil || string(k) != s {
			t.Errorf("ParseKeepEvents(%q) = %q, %v", s, k, err)
		}
	}
	for _, s := range []string{"", "ALL", "none", "outcome"} {
		if _, err := bus.ParseKeepEvents(s); !errors.Is(err, bus.ErrInvalidConfig) || !strings.Contains(err.Error(), "KeepEvents") {
			t.Errorf("ParseKeepEvents(%q) = %v, want an error naming KeepEvents", s, err)
		}
	}
	if err := (bus.Config{KeepEvents: "some"}).Validate(); !errors.Is(err, bus.ErrInvalidConfig) || !strings.Contains(err.Error(), `"some"`) {
		t.Errorf("Validate with KeepEvents \"some\": %v", err)
	}
}

// A process that leaves the system's settings out takes those of the
// streams that exist: it must not put a running system back to the
// defaults (on a cluster, shrink every stream to one replica) when it
// declares them. A value given changes them, and the change is logged.
func TestDeclareKeepsTheSystemsSettingsLeftOut(t *testing.T) {
	cfg := bustest.StartBare(t)
	ctx := context.Background()
	first := bustest.Dial(t, cfg)
	first.Config.Retention, first.Config.Partitions, first.Config.KeepEvents = 10*time.Minute, 4, bus.KeepOutcomeEvents
	if err := first.Declare(ctx); err != nil {
		t.Fatal(err)
	}
	check := func(when string, retention time.Duration, partitions int, keep bus.KeepEvents) {
		t.Helper()
		plans, err := first.JS.Stream(ctx, bus.StreamPlans)
		if err != nil {
			t.Fatal(err)
		}
		pc := plans.CachedInfo().Config
		if pc.MaxAge != retention || pc.SubjectTransform == nil ||
			pc.SubjectTransform.Destination != bus.Partitioned(bus.SubjectPlansAll).Transform(partitions) {
			t.Errorf("%s: plans stream keeps %s, transform %+v; want %s and %d partitions", when, pc.MaxAge, pc.SubjectTransform, retention, partitions)
		}
		events, err := first.JS.Stream(ctx, bus.StreamEvents)
		if err != nil {
			t.Fatal(err)
		}
		if got := events.CachedInfo().Config.Subjects; !slices.Equal(got, bus.EventSubjectsKept(keep)) {
			t.Errorf("%s: events stream keeps %v, want %s's", when, got, keep)
		}
	}
	check("declared with settings", 10*time.Minute, 4, bus.KeepOutcomeEvents)

	// A process started with none of them (a dispatcher added later).
	var log strings.Builder
	joining, err := bus.Dial(ctx, cfg, zerolog.New(&log))
	if err != nil {
		t.Fatal(err)
	}
	defer joining.Close()
	if err := joining.Declare(ctx); err != nil {
		t.Fatal(err)
	}
	check("declared again with none given", 10*time.Minute, 4, bus.KeepOutcomeEvents)
	if c := joining.Config; c.Retention != 10*time.Minute || c.Partitions != 4 || c.KeepEvents != bus.KeepOutcomeEvents || c.Replicas != 1 {
		t.Errorf("the joining process runs with retention %s, %d partitions, keep %q, %d replicas; want the system's 10m, 4, outcomes, 1",
			c.Retention, c.Partitions, c.KeepEvents, c.Replicas)
	}
	if strings.Contains(log.String(), "differs") {
		t.Errorf("nothing was given, yet a difference was logged: %s", log.String())
	}

	// One given changes the system's, and says so; the others are kept.
	log.Reset()
	changing, err := bus.Dial(ctx, cfg, zerolog.New(&log))
	if err != nil {
		t.Fatal(err)
	}
	defer changing.Close()
	changing.Config.Retention = 20 * time.Minute
	if err := changing.Declare(ctx); err != nil {
		t.Fatal(err)
	}
	check("declared with another retention", 20*time.Minute, 4, bus.KeepOutcomeEvents)
	if !strings.Contains(log.String(), `"setting":"retention","system":"10m0s","given":"20m0s"`) {
		t.Errorf("the change of retention was not logged: %s", log.String())
	}

	// A new system gets the defaults.
	fresh := bustest.Dial(t, bustest.StartBare(t))
	if err := fresh.Declare(ctx); err != nil {
		t.Fatal(err)
	}
	if c := fresh.Config.Defaults(); c.Retention != bus.DefaultRetention || c.Partitions != bus.DefaultPartitions || c.KeepEvents != bus.KeepAllEvents || c.Replicas != 1 {
		t.Errorf("a new system runs with %+v, want the defaults", c)
	}
}

// The log of a lost connection names the server that was lost.
func TestDisconnectNamesTheServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := bus.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir()}
	srv, err := embedded.Start(ctx, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	cfg.URL = srv.ClientURL()
	logs := make(chan string, 16)
	c, err := bus.Dial(ctx, cfg, zerolog.New(chanWriter(logs)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv.Shutdown()
	for {
		select {
		case line := <-logs:
			if strings.Contains(line, "disconnected from NATS") {
				if !strings.Contains(line, `"server":"`+cfg.URL+`"`) {
					t.Errorf("the disconnect does not name %s: %s", cfg.URL, line)
				}
				return
			}
		case <-ctx.Done():
			t.Fatal("no disconnect logged")
		}
	}
}

// chanWriter sends each log line to a channel.
type chanWriter chan string

func (w chanWriter) Write(p []byte) (int, error) {
	select {
	case w <- string(p):
	default:
	}
	return len(p), nil
}
