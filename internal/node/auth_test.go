package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bench"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/dispatcher"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

const wait = time.Minute

// logBuffer collects a node's log, the embedded server's included, safe
// for concurrent writes.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func startAuthNode(t *testing.T, dataDir string, log zerolog.Logger) *node.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	n, err := node.Start(ctx, node.Config{
		Bus:     bus.Config{Listen: "127.0.0.1:0", DataDir: dataDir, DuplicateWindow: time.Minute},
		Auth:    true,
		Workers: 2,
		Worker:  worker.Config{Skills: skills.Builtins(skills.BuiltinConfig{})},
	}, log)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(n.Stop)
	return n
}

// newClient is a planbus client on conn.
func newClient(t *testing.T, conn *bus.Conn) *client.Client {
	t.Helper()
	c, err := client.New(conn.NC)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// With Auth, every in-process component connects as its role and the
// whole system works within its permissions: a client's plans run through
// the planner with retries (timers), session patches, health changes and a
// plan timeout that cancels a running call, and the server logs no
// permissions violation on the way.
func TestAuthNodeRunsPlansWithEveryComponentOnItsRole(t *testing.T) {
	var logs logBuffer
	log := zerolog.New(&logs).Level(zerolog.WarnLevel)
	dataDir := t.TempDir()
	n := startAuthNode(t, dataDir, log)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()

	conn, err := n.DialAs(ctx, bus.RoleClient, log)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	c := newClient(t, conn)
	p := []byte(`{"planId": "auth-ok", "sessionId": "s-auth", "tools": [
		{"toolId": "A", "skill": "echo", "input": {"city": "Lisbon"}},
		{"toolId": "F", "skill": "fail", "dependencies": ["A"], "input": {"attempts": 1, "category": "network", "message": "reset"},
		 "retryPolicy": {"maxAttempts": 2, "backoffMs": 50}},
		{"toolId": "R", "skill": "remember", "dependencies": ["A"], "input": {"seen": "Lisbon"}},
		{"toolId": "D", "skill": "echo", "dependencies": ["F", "R"], "input": {"a": {"$ref": "A"}}}]}`)
	var events []string
	out, err := c.RunPlan(ctx, p, func(ev planbus.Event) { events = append(events, string(ev.Type)) })
	if err != nil {
		t.Fatalf("run: %v\nlog:\n%s", err, logs.String())
	}
	if res := out.Execution; res == nil || !res.Success || res.PlanID != "auth-ok-1" {
		t.Fatalf("outcome %+v, want plan auth-ok-1 to succeed\nlog:\n%s", out, logs.String())
	}
	for _, want := range []string{"request.accepted", "tool.started", "tool.retrying", "skill.health", "request.succeeded"} {
		if !strings.Contains(strings.Join(events, " "), want) {
			t.Errorf("events %v: no %s", events, want)
		}
	}

	// A plan that times out while a call runs: its dispatcher cancels
	// the call on the workers.
	slow := []byte(`{"planId": "auth-timeout", "timeoutMs": 300, "tools": [
		{"toolId": "S", "skill": "sleep", "input": {"ms": 20000}}]}`)
	out, err = c.RunPlan(ctx, slow, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res := out.Execution; res.State != planbus.PlanTimeout || res.Tools[0].State != planbus.ToolCancelled {
		t.Errorf("timed out plan: %s, tool %s; want timeout and cancelled", res.State, res.Tools[0].State)
	}

	// The client endpoints answer a client.
	for _, subj := range []string{bus.SubjectSkills, bus.SubjectSessionReset} {
		reply, err := conn.NC.RequestWithContext(ctx, subj, []byte(`{"sessionId": "s-auth"}`))
		if err != nil || reply.Header.Get("Nats-Service-Error") != "" {
			t.Errorf("%s: %v %s", subj, err, reply.Header.Get("Nats-Service-Error"))
		}
	}

	if strings.Contains(logs.String(), "Violation") || strings.Contains(logs.String(), "permissions violation") {
		t.Errorf("the system needed more than its roles allow:\n%s", logs.String())
	}
}

// With authorization on, external planners live under planners.: a
// request naming another subject is refused at the endpoint, before the
// planner would publish there.
func TestAuthNodeKeepsExternalPlannersUnderPlanners(t *testing.T) {
	n := startAuthNode(t, t.TempDir(), zerolog.Nop())
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	conn, err := n.DialAs(ctx, bus.RoleClient, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := newClient(t, conn)
	_, err = c.Run(ctx, []byte(`{"kind": "external", "planner": "planbus.cancel.victim"}`), nil)
	var rej *client.RejectedError
	if !errors.As(err, &rej) || rej.Reply.Error.Field != "/planner" || !strings.Contains(rej.Reply.Error.Message, "planners.") {
		t.Fatalf("err = %v, want a rejection at /planner naming planners.", err)
	}
	// One under planners. is taken (and, with nobody answering, ends
	// in the fallback).
	out, err := c.Run(ctx, []byte(`{"kind": "external", "planner": "planners.nobody", "maxAttempts": 1}`), nil)
	if err != nil || out.Status != "fallback" {
		t.Fatalf("outcome %+v, %v; want the fallback", out, err)
	}
}

// Each in-process component really is its role: what the role may not do
// is refused on its own connection.
func TestAuthNodeComponentsAreConfinedToTheirRoles(t *testing.T) {
	n := startAuthNode(t, t.TempDir(), zerolog.Nop())
	for _, c := range []struct {
		name    string
		conn    *bus.Conn
		subject string
	}{
		{"worker", n.Workers[0].Conn, bus.CancelSubject("x")},
		{"worker", n.Workers[0].Conn, "$KV." + bus.BucketHealth + ".victim.echo"},
		{"dispatcher", n.Dispatchers[0].Conn, bus.ResultSubject("x")},
		{"planner", n.Planners[0].Conn, bus.ToolSubject("echo")},
	} {
		t.Run(c.name+" "+c.subject, func(t *testing.T) {
			if got := c.conn.Config.Role; string(got) != c.name {
				t.Fatalf("role %q, want %q", got, c.name)
			}
			// In the embedded server's process, components connect
			// through memory (net.Pipe), not its port, and are held to
			// their roles all the same.
			if got := c.conn.NC.ConnectedAddr(); got != "pipe" {
				t.Errorf("connected to %q, want the in-process connection (pipe)", got)
			}
			err := publishDenied(t, c.conn.NC, c.subject)
			if err == nil {
				t.Errorf("publish to %s was accepted", c.subject)
			}
		})
	}
}

// publishDenied publishes to subject and returns the permissions violation
// the server reports, or nil if it reports none before a round trip.
func publishDenied(t *testing.T, nc *nats.Conn, subject string) error {
	t.Helper()
	if err := nc.Publish(subject, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	// The server answers PUBs in order: once the flush's PONG is back,
	// any -ERR for the publish has been read.
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if le := nc.LastError(); le != nil && errors.Is(le, nats.ErrPermissionViolation) && strings.Contains(le.Error(), subject) {
		return le
	}
	return nil
}

// Seeds are written once, private to their owner, and reused by the next
// start on the same data directory.
func TestAuthNodeKeepsItsSeeds(t *testing.T) {
	dataDir := t.TempDir()
	n := startAuthNode(t, dataDir, zerolog.Nop())
	dir := filepath.Join(dataDir, "auth")
	if n.Seeds.Dir != dir {
		t.Errorf("seeds in %s, want %s", n.Seeds.Dir, dir)
	}
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("seed dir: %v, mode %v; want 0700", err, st.Mode().Perm())
	}
	first := map[bus.Role][]byte{}
	for _, r := range bus.Roles() {
		path := filepath.Join(dir, string(r)+".nk")
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v; want 0600", path, err, st.Mode().Perm())
		}
		first[r], _ = os.ReadFile(path)
	}
	n.Stop()

	n2 := startAuthNode(t, dataDir, zerolog.Nop())
	for _, r := range bus.Roles() {
		again, _ := os.ReadFile(n2.Seeds.File(r))
		if !bytes.Equal(again, first[r]) {
			t.Errorf("%s: the seed changed on restart", r)
		}
	}
	// An old holder of the client seed still gets in.
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	conn, err := n2.DialAs(ctx, bus.RoleClient, zerolog.Nop())
	if err != nil {
		t.Fatalf("client after restart: %v", err)
	}
	conn.Close()
}

// Auth needs the embedded server it configures.
func TestAuthNeedsTheEmbeddedServer(t *testing.T) {
	_, err := node.Start(context.Background(), node.Config{Bus: bus.Config{URL: "nats://127.0.0.1:1"}, Auth: true}, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "embedded") {
		t.Fatalf("err = %v, want one saying Auth needs the embedded server", err)
	}
}

// With authorization on, a client does everything package client offers
// within its role: submits, reads a running request's state (queued or
// not), watches its past and live events, cancels it (the planner hands
// the cancel to the dispatchers, which stop the call) and lists requests;
// the server logs no permissions violation on the way.
func TestAuthClientSubmitsWatchesCancelsAndLists(t *testing.T) {
	var logs logBuffer
	log := zerolog.New(&logs).Level(zerolog.WarnLevel)
	n := startAuthNode(t, t.TempDir(), log)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	conn, err := n.DialAs(ctx, bus.RoleClient, log)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := newClient(t, conn)
	acc, err := c.SubmitPlanJSON(ctx, []byte(`{"planId": "auth-nap", "tools": [
		{"toolId": "S", "skill": "sleep", "input": {"ms": 30000}},
		{"toolId": "E", "skill": "echo", "dependencies": ["S"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 1)
	watched := make(chan *planbus.Outcome, 1)
	var seen []string
	go func() {
		o, err := c.Watch(ctx, acc.RequestID, func(ev planbus.Event) {
			seen = append(seen, string(ev.Type))
			if ev.Type == planbus.EventToolStarted {
				started <- struct{}{}
			}
		})
		if err != nil {
			t.Error(err)
		}
		watched <- o
	}()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatalf("the sleep never started\nlog:\n%s", logs.String())
	}
	st, err := c.Status(ctx, acc.RequestID)
	if err != nil || st.Request.Status != planbus.RequestExecuting || st.Plan == nil {
		t.Fatalf("status %+v, %v", st, err)
	}
	reply, err := c.Cancel(ctx, "auth-nap-1", "as a client")
	if err != nil || reply.Status != planbus.CancelCancelling {
		t.Fatalf("cancel: %+v, %v\nlog:\n%s", reply, err, logs.String())
	}
	o := <-watched
	if o == nil || o.Status != planbus.StatusCancelled || o.Execution.Tools[0].State != planbus.ToolCancelled {
		t.Fatalf("outcome %+v, want cancelled", o)
	}
	for _, want := range []string{"request.accepted", "tool.started", "tool.cancelled", "tool.skipped", "plan.cancelled", "request.cancelled"} {
		if !slices.Contains(seen, want) {
			t.Errorf("watched events %v: no %s", seen, want)
		}
	}
	list, err := c.Inspector().List(ctx, planbus.ListRequest{})
	if err != nil || len(list.Requests) != 1 || list.Requests[0].Status != planbus.StatusCancelled {
		t.Errorf("list %+v, %v", list, err)
	}
	if strings.Contains(logs.String(), "Violation") || strings.Contains(logs.String(), "permissions violation") {
		t.Errorf("the client, planner or dispatcher needed more than their roles allow:\n%s", logs.String())
	}
}

// With authorization on, dispatchers find each other (a ping of their
// micro service, on their role's inbox) and share the partitions out,
// within their role.
func TestAuthDispatchersSharePartitions(t *testing.T) {
	var logs logBuffer
	log := zerolog.New(&logs).Level(zerolog.WarnLevel)
	n := startAuthNode(t, t.TempDir(), log)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := n.AddDispatcher(ctx, dispatcher.Config{}, log); err != nil {
		t.Fatal(err)
	}
	conn, err := n.DialAs(ctx, bus.RoleAdmin, log)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := bench.Settle(ctx, conn.NC, 2, bus.DefaultPartitions); err != nil {
		t.Fatalf("%v\nlog:\n%s", err, logs.String())
	}
	if strings.Contains(logs.String(), "Violation") || strings.Contains(logs.String(), "permissions violation") {
		t.Errorf("the dispatchers needed more than their role allows:\n%s", logs.String())
	}
}

// A worker holding a worker group's seed serves the group's skills: a plan
// of one of them runs on it. With the same seed, a worker that would serve
// another skill is refused when it advertises it.
func TestAuthWorkerGroupServesItsSkillsOnly(t *testing.T) {
	dataDir := t.TempDir()
	if err := bus.AddWorkerGroup(filepath.Join(dataDir, "auth"), "tallies", []string{"tally"}); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	log := zerolog.New(&logs).Level(zerolog.WarnLevel)
	n := startAuthNode(t, dataDir, log)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	dialGroup := func() *bus.Conn {
		t.Helper()
		cfg := n.Bus
		cfg.Role, cfg.NKeySeedFile = bus.RoleWorker, n.Seeds.GroupFile("tallies")
		conn, err := bus.Dial(ctx, cfg, log)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(conn.Close)
		return conn
	}
	serve := func(name string) (*worker.Worker, error) {
		s := skill.Skill{Manifest: skill.Manifest{Name: name}, Handler: skill.HandlerFunc(func(context.Context, *skill.Call) (skill.Result, error) {
			return skill.Result{Output: json.RawMessage(`{"by":"tallies"}`)}, nil
		})}
		return worker.New(dialGroup().NC, worker.Config{ID: "w-" + name, Skills: []skill.Skill{s}, DrainTimeout: time.Second})
	}

	w, err := serve("tally")
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	t.Cleanup(func() { stop(); <-ran })

	conn, err := n.DialAs(ctx, bus.RoleClient, log)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The planner takes plans of the skills it has seen advertised: wait
	// until it lists tally.
	select {
	case <-w.Ready():
	case err := <-ran:
		t.Fatalf("the group's worker stopped: %v", err)
	}
	for {
		reply, err := conn.NC.RequestWithContext(ctx, bus.SubjectSkills, []byte(`{}`))
		if err != nil {
			t.Fatalf("skills: %v", err)
		}
		if strings.Contains(string(reply.Data), `"tally"`) {
			break
		}
	}
	out, err := newClient(t, conn).RunPlan(ctx, []byte(`{"planId": "grp", "tools": [{"toolId": "T", "skill": "tally"}]}`), nil)
	if err != nil {
		t.Fatalf("run: %v\nlog:\n%s", err, logs.String())
	}
	if res := out.Execution; res == nil || !res.Success || string(res.Tools[0].Output) != `{"by":"tallies"}` {
		t.Fatalf("outcome %+v; want tally to succeed on the group's worker\nlog:\n%s", out.Execution, logs.String())
	}
	if strings.Contains(logs.String(), "Violation") || strings.Contains(logs.String(), "permissions violation") {
		t.Errorf("the group's worker needed more than its grants:\n%s", logs.String())
	}

	// The worker seed may write any skill's manifest (it may serve any
	// skill): one that breaks tally's is undone by tally's worker, and
	// tally's plans run again (issue 23: a manifest of {"inputSchema":
	// {"not": {}}} had every request for the skill refused).
	wconn, err := n.DialAs(ctx, bus.RoleWorker, log)
	if err != nil {
		t.Fatal(err)
	}
	defer wconn.Close()
	skillsKV, err := wconn.JS.KeyValue(ctx, bus.BucketSkills)
	if err != nil {
		t.Fatal(err)
	}
	mine, err := skillsKV.Get(ctx, "tally")
	if err != nil {
		t.Fatal(err)
	}
	watch, err := skillsKV.Watch(ctx, "tally", jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = watch.Stop() }()
	if _, err := skillsKV.Put(ctx, "tally", []byte(`{"inputSchema":{"not":{}}}`)); err != nil {
		t.Fatal(err)
	}
	for restored := false; !restored; {
		select {
		case e := <-watch.Updates():
			restored = e != nil && string(e.Value()) == string(mine.Value())
		case <-ctx.Done():
			t.Fatalf("tally's manifest was not put back\nlog:\n%s", logs.String())
		}
	}
	out, err = newClient(t, conn).RunPlan(ctx, []byte(`{"planId": "grp2", "tools": [{"toolId": "T", "skill": "tally", "input": {"n": 1}}]}`), nil)
	if err != nil || out.Execution == nil || !out.Execution.Success {
		t.Fatalf("tally after its manifest was put back: %v %+v", err, out)
	}

	// Another skill with the group's seed: refused at its manifest.
	other, err := serve("count")
	if err != nil {
		t.Fatal(err)
	}
	err = other.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), `"$KV.planbus-skills.count"`) || !errors.Is(err, nats.ErrPermissionViolation) {
		t.Fatalf("serving count as the tallies group: %v; want a permissions error naming count", err)
	}
}
