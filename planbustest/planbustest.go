// Package planbustest runs planbus inside a test: an embedded NATS server
// with JetStream on a temporary directory, listening on a free port of
// 127.0.0.1, with a planner, a dispatcher and a tool worker serving the
// built-in skills and the test's own. It is the whole system, on a real
// bus, as `planner run` starts it; nothing is mocked.
//
//	func TestCount(t *testing.T) {
//		node := planbustest.Start(t, planbustest.WithSkills(count))
//		run, err := node.Client().SubmitPlan(ctx, planbus.Plan{Tools: []planbus.Tool{
//			{ToolID: "a", Skill: "count", Input: Text{Text: "one two three"}},
//		}})
//		...
//		out, err := run.Wait(ctx)
//	}
//
// Start takes a second or two, and each node is its own: tests do not see
// each other's plans, sessions or skill health.
package planbustest

import (
	"context"
	"testing"
	"time"

	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

// Node is a running planbus for one test.
type Node struct {
	n      *node.Node
	url    string
	client *client.Client
}

// Option changes what Start runs.
type Option func(*config)

type config struct {
	skills []skill.Skill
}

// WithSkills serves these skills beside the built-in ones (echo, sleep,
// fail, remember, and shell and http with nothing allowed); a skill named
// like a built-in one takes its place.
func WithSkills(s ...skill.Skill) Option {
	return func(c *config) { c.skills = append(c.skills, s...) }
}

// startTimeout bounds Start: a slow machine under the race detector starts
// a node in a few seconds.
const startTimeout = 2 * time.Minute

// Start runs a node for t and returns once its planner, dispatcher and
// worker are ready; it fails t if they cannot start. t.Cleanup stops it
// and removes its files.
func Start(t testing.TB, opts ...Option) *Node {
	t.Helper()
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	served := map[string]int{}
	var all []skill.Skill
	for _, s := range append(skills.Builtins(skills.BuiltinConfig{}), cfg.skills...) {
		if i, ok := served[s.Manifest.Name]; ok {
			all[i] = s
			continue
		}
		served[s.Manifest.Name] = len(all)
		all = append(all, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	n, err := node.Start(ctx, node.Config{
		Bus:     bustest.Start(t),
		Workers: 1,
		Worker:  worker.Config{Skills: all},
	}, bustest.Log())
	if err != nil {
		t.Fatalf("planbustest: start: %v", err)
	}
	t.Cleanup(n.Stop)
	conn, err := n.Dial(ctx, bustest.Log())
	if err != nil {
		t.Fatalf("planbustest: connect: %v", err)
	}
	t.Cleanup(conn.Close)
	c, err := client.New(conn.NC)
	if err != nil {
		t.Fatalf("planbustest: client: %v", err)
	}
	return &Node{n: n, url: n.Bus.URL, client: c}
}

// Client is a client of the node, on a connection of its own.
func (n *Node) Client() *client.Client { return n.client }

// URL is the node's NATS URL (nats://127.0.0.1:port), for other clients,
// workers in other processes, or the nats CLI.
func (n *Node) URL() string { return n.url }
