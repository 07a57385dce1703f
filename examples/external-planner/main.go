// Command external-planner is a small external planner for planbus: a
// NATS responder that turns a request into Plan JSON. planbus asks it on
// its subject (default planners.travel) with the request's input, the
// skills and their health, the disabled skills, the attempt number and the
// last execution result; it answers with a plan, or with {"error": {...}}.
// An LLM service would answer the same questions the same way; this one
// knows three ways to travel and takes the first whose skills all work.
//
//	go run ./examples/external-planner --nats-url nats://127.0.0.1:4222
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/nats-io/nats.go"

	"github.com/planbus/planbus"
)

// ways to get somewhere, best first: each a chain of tools, "{to}" in an
// input standing for the destination.
var ways = [][]planbus.Tool{
	{{ToolID: "walk", Skill: "walk", Input: map[string]any{"from": "here", "to": "{to}"}}},
	{{ToolID: "hail", Skill: "hail", Input: map[string]any{"vehicle": "taxi", "at": "here"}},
		{ToolID: "ride", Skill: "ride", Input: map[string]any{"vehicle": "taxi", "from": "here", "to": "{to}"}}},
	{{ToolID: "wait", Skill: "wait-for", Input: map[string]any{"bus": "bus1", "at": "here"}},
		{ToolID: "ride", Skill: "ride", Input: map[string]any{"vehicle": "bus1", "from": "here", "to": "{to}"}}},
}

// Plan answers one question: a planbus.Plan, or a planbus.PlannerFailure.
func Plan(data []byte) any {
	var q planbus.PlannerQuestion
	if err := json.Unmarshal(data, &q); err != nil {
		return fail("BAD_QUESTION", planbus.CategoryPermanent, err.Error())
	}
	var in struct {
		To string `json:"to"`
	}
	if json.Unmarshal(q.Input, &in) != nil || in.To == "" {
		return fail("BAD_INPUT", planbus.CategoryInvalidInput, `want input {"to": "<place>"}`)
	}
	// A skill is usable when it is registered, not permanently failed in
	// the session, and not disabled for this request.
	usable := map[string]bool{}
	for _, s := range q.Skills {
		usable[s.Name] = s.Health != "permanentFailure" && !slices.Contains(q.DisabledSkills, s.Name)
	}
	for _, way := range ways {
		ok := true
		for _, t := range way {
			ok = ok && usable[t.Skill]
		}
		if !ok {
			continue
		}
		var tools []planbus.Tool
		for i, t := range way {
			t.Input = fill(t.Input.(map[string]any), in.To)
			if i > 0 {
				t.Dependencies = []string{way[i-1].ToolID}
			}
			tools = append(tools, t)
		}
		return planbus.Plan{Tools: tools, Metadata: map[string]any{"plannedBy": "example external planner"}}
	}
	return fail("NO_WAY", planbus.CategoryPermanent, fmt.Sprintf("no way to %s with the skills that work", in.To))
}

// fill puts the destination into an input.
func fill(in map[string]any, to string) map[string]any {
	out := map[string]any{}
	for k, v := range in {
		if v == "{to}" {
			v = to
		}
		out[k] = v
	}
	return out
}

func fail(code planbus.Code, category planbus.Category, msg string) planbus.PlannerFailure {
	return planbus.PlannerFailure{Error: planbus.ErrorInfo{Code: code, Category: category, Message: msg}}
}

// Serve answers on subject until ctx ends.
func Serve(ctx context.Context, nc *nats.Conn, subject string) error {
	sub, err := nc.QueueSubscribe(subject, "external-planner", func(m *nats.Msg) {
		data, _ := json.Marshal(Plan(m.Data))
		_ = m.Respond(data)
	})
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

func main() {
	url := flag.String("nats-url", envOr("NATS_URL", nats.DefaultURL), "NATS server URL")
	subject := flag.String("subject", "planners.travel", "subject to answer on")
	nkey := flag.String("nkey", os.Getenv("NATS_NKEY"), "nkey seed file to authenticate with (with auth on: the worker role's, worker.nk)")
	flag.Parse()
	opts := []nats.Option{nats.Name("planbus-example-external-planner")}
	if *nkey != "" {
		o, err := nats.NkeyOptionFromSeed(*nkey)
		if err != nil {
			log.Fatalf("external-planner: %v", err)
		}
		opts = append(opts, o)
	}
	nc, err := nats.Connect(*url, opts...)
	if err != nil {
		log.Fatalf("external-planner: %v", err)
	}
	defer nc.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Printf("external-planner: answering on %s", *subject)
	if err := Serve(ctx, nc, *subject); err != nil {
		log.Fatalf("external-planner: %v", err)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
