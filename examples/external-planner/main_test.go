package main

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

// TestExternalPlannerReplansAroundABrokenSkill runs this planner against a
// real node with examples/requests/external.json: walking is down, so the first plan fails, the walk skill is
// disabled, and the second plan takes a taxi.
func TestExternalPlannerReplansAroundABrokenSkill(t *testing.T) {
	cfg := bustest.Start(t)
	var sk []skill.Skill
	for _, spec := range strings.Fields("walk(from,to)=network hail(vehicle,at) ride(vehicle,from,to) wait-for(bus,at)") {
		s, err := skills.Simulated(spec)
		if err != nil {
			t.Fatal(err)
		}
		sk = append(sk, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := node.Start(ctx, node.Config{Bus: cfg, Workers: 1, Worker: worker.Config{Skills: sk, DrainTimeout: time.Second}}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	conn := bustest.Dial(t, cfg)
	go func() { _ = Serve(ctx, bustest.Dial(t, cfg).NC, "planners.travel") }()
	// Serve subscribes asynchronously; ask until it answers.
	for {
		if _, err := conn.NC.Request("planners.travel", []byte(`{}`), time.Second); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the external planner never answered")
		}
	}
	c, err := client.New(conn.NC)
	if err != nil {
		t.Fatal(err)
	}
	// The request the README runs against this planner.
	req, err := os.ReadFile("../requests/external.json")
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Run(ctx, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Success || out.Attempts != 2 {
		t.Fatalf("outcome %s after %d attempts: %+v", out.Status, out.Attempts, out.History)
	}
	var used []string
	for _, tl := range out.Execution.Tools {
		used = append(used, tl.Skill)
	}
	if !slices.Equal(used, []string{"hail", "ride"}) {
		t.Errorf("second plan used %v, want the taxi", used)
	}
}

func TestPlanRefusesBadInput(t *testing.T) {
	ans, ok := Plan([]byte(`{"input":{"from":"x"},"skills":[]}`)).(planbus.PlannerFailure)
	if !ok || ans.Error.Code != "BAD_INPUT" {
		t.Fatalf("got %+v, want a BAD_INPUT failure", ans)
	}
}
