package node_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/planner"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

// With authorization on, a client runs a GOAP agent within its role: it
// starts it, changes its world the authorised way (the remember skill, in
// a plan of its own: a client may not write the session bucket), reads
// its status and stops it; the planner perceives the change through its
// consumer on the sessions bucket and preempts the running plan. No
// component needs more than its role allows.
func TestAuthNodeRunsAnAgentWithinTheRoles(t *testing.T) {
	var logs logBuffer
	log := zerolog.New(&logs).Level(zerolog.WarnLevel)
	sk := append([]skill.Skill(nil), skills.Builtins(skills.BuiltinConfig{})...)
	for _, spec := range []string{"gather@1m", "light", "pitch", "run"} {
		s, err := skills.Simulated(spec)
		if err != nil {
			t.Fatal(err)
		}
		sk = append(sk, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	n, err := node.Start(ctx, node.Config{
		Bus:     bus.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), DuplicateWindow: time.Minute},
		Auth:    true,
		Workers: 2,
		Worker:  worker.Config{Skills: sk, DrainTimeout: time.Second},
		Planner: planner.Config{DomainsDir: "../../examples/goap"},
	}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	conn, err := n.DialAs(ctx, bus.RoleClient, log)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := newClient(t, conn)

	var mu sync.Mutex
	var seen []planbus.Event
	got := make(chan struct{}, 1)
	sub, err := conn.NC.Subscribe(bus.EventsOfRequest("camp"), func(m *nats.Msg) {
		var ev planbus.Event
		if json.Unmarshal(m.Data, &ev) == nil {
			mu.Lock()
			seen = append(seen, ev)
			mu.Unlock()
			select {
			case got <- struct{}{}:
			default:
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	_ = conn.NC.Flush()
	waitFor := func(typ planbus.EventType, goal string) {
		t.Helper()
		for {
			mu.Lock()
			for _, ev := range seen {
				if ev.Type == typ && ev.Goal == goal {
					mu.Unlock()
					return
				}
			}
			mu.Unlock()
			select {
			case <-got:
			case <-ctx.Done():
				t.Fatalf("no %s event for %q\nlog:\n%s", typ, goal, logs.String())
			}
		}
	}

	if _, err := c.StartAgent(ctx, []byte(`{"requestId": "camp", "sessionId": "camp", "goap": {"domain": "camp"}}`)); err != nil {
		t.Fatal(err)
	}
	waitFor(planbus.EventToolStarted, "") // gathering wood, for a minute
	storm := []byte(`{"kind": "plan", "sessionId": "camp", "plan": {"tools": [{"toolId": "storm", "skill": "remember", "input": {"storm": true}}]}}`)
	if out, err := c.Run(ctx, storm, nil); err != nil || !out.Success {
		t.Fatalf("the storm: %v %+v", err, out)
	}
	waitFor(planbus.EventAgentPreempted, "warm-up")
	waitFor(planbus.EventAgentGoalSucceeded, "take-shelter")
	st, err := c.AgentStatus(ctx, "camp")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(st.Report, "take-shelter: 100.0 [SATISFIED]") {
		t.Errorf("report:\n%s", st.Report)
	}
	if r, err := c.StopAgent(ctx, "camp", "done"); err != nil || r.Status != planbus.AgentStopStopped {
		t.Errorf("stop: %v %+v", err, r)
	}
	if o, err := c.Await(ctx, "camp"); err != nil || o.Status != planbus.StatusCancelled {
		t.Errorf("outcome: %v %+v", err, o)
	}
	if strings.Contains(logs.String(), "Violation") || strings.Contains(logs.String(), "permissions violation") {
		t.Errorf("the agent needed more than the roles allow:\n%s", logs.String())
	}
}
