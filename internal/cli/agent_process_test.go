package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/session"
)

// A GOAP agent outlives a kill -9 of its planner process: the step it
// released finishes while no planner runs, a storm comes meanwhile, and
// the planner started in its place takes both up where the agent was —
// shelter first, then the fire and the tent — until no goal is left.
func TestAgentSurvivesKillNineOfItsPlanner(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills real processes; skipped with -short")
	}
	cfg := bustest.Start(t)
	p := &procs{t: t, bins: buildCommands(t), env: append(processEnv(t), "NATS_URL="+cfg.URL, "PLANBUS_LOG_LEVEL=warn")}
	t.Cleanup(p.stopAll)
	plannerArgs := []string{"serve", "--planner-ack-wait", "1s", "--domains", filepath.Join(bustest.RepoRoot(t), "examples", "goap")}
	p.start("dispatcher", "--dispatcher-ack-wait", "1s")
	p.start("toolworker", "--ack-wait", "1s", "--skills", "remember", "--simulate", "gather@1500ms light pitch run")
	first := p.start("planner", plannerArgs...)

	conn := bustest.Dial(t, cfg)
	c := newClient(t, conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for { // the planner answers, and the worker's skills are advertised
		_, err := conn.NC.Request("$SRV.PING.planbus-planner", nil, time.Second)
		kv, kerr := conn.JS.KeyValue(ctx, bus.BucketSkills)
		if err == nil && kerr == nil {
			if _, gerr := kv.Get(ctx, "run"); gerr == nil {
				break
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal("the planner or the worker never came up")
		case <-time.After(50 * time.Millisecond):
		}
	}

	var mu sync.Mutex
	var trail []string
	gathering := make(chan struct{}, 1)
	onEvent := func(ev planbus.Event) {
		mu.Lock()
		defer mu.Unlock()
		trail = append(trail, fmt.Sprintf("%s %s %s %s", ev.Type, ev.Goal, ev.ToolID, ev.Message))
		if ev.Type == planbus.EventToolStarted && ev.ToolID == "1-gather-wood" {
			select {
			case gathering <- struct{}{}:
			default:
			}
		}
	}
	acc, err := c.StartAgent(ctx, []byte(`{"requestId": "camper", "sessionId": "camp", "goap": {"domain": "camp"}}`))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var out *planbus.Outcome
	go func() {
		var err error
		out, err = c.Watch(ctx, acc.RequestID, onEvent)
		done <- err
	}()
	select {
	case <-gathering:
	case <-ctx.Done():
		t.Fatal("the agent never started gathering wood")
	}
	before, err := c.AgentStatus(ctx, "camp")
	if err != nil {
		t.Fatal(err)
	}
	p.kill9(first)
	// While no planner runs: the world changes.
	store, err := session.Open(ctx, conn.JS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Patch(ctx, "camp", []byte(`{"storm": true}`)); err != nil {
		t.Fatal(err)
	}
	p.start("planner", plannerArgs...)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		mu.Lock()
		t.Fatalf("the agent did not end; events:\n%v", trail)
	}
	st, err := c.AgentStatus(ctx, "camp")
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if out.Status != planbus.StatusSucceeded || st.Status != planbus.AgentIdle || st.Planner == before.Planner {
		t.Fatalf("outcome %s, agent %s by %s (was %s): want succeeded and idle, by the second planner; events:\n%v",
			out.Status, st.Status, st.Planner, before.Planner, trail)
	}
	for _, g := range st.Goals {
		if !g.Satisfied || g.Stats.Succeeded != 1 {
			t.Errorf("goal %s: satisfied %v, stats %+v; events:\n%v", g.Goal, g.Satisfied, g.Stats, trail)
		}
	}
}
