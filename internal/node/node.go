// Package node runs planbus in one process: an embedded JetStream server
// (unless an external NATS URL is configured), dispatchers and tool
// workers, each on its own connection as if it were its own process. It is
// the embedded default of `planner run` and `planner serve`, and the
// harness of the integration tests.
package node

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/dispatcher"
	"github.com/planbus/planbus/internal/planner"
	"github.com/planbus/planbus/worker"
)

// Config of a node.
type Config struct {
	Bus bus.Config
	// Auth turns on authorization on the embedded server: one nkey user
	// per role (bus.Roles), with seeds in <DataDir>/auth, created on first
	// start and reused after. Every component connects as its role. It
	// needs the embedded server (an empty Bus.URL).
	Auth bool
	// Dispatchers to run; 0 means one. NoDispatcher runs none.
	Dispatchers  int
	NoDispatcher bool
	Dispatcher   dispatcher.Config
	// Workers to run, each serving Worker.Skills; 0 runs none.
	Workers int
	Worker  worker.Config
	// NoPlanner leaves the planner service out.
	NoPlanner bool
	Planner   planner.Config
}

// Node is a running set of components.
type Node struct {
	Bus bus.Config // with the URL of the server in use
	// Seeds are the roles' seed files when Config.Auth is on, else nil.
	Seeds       *bus.Seeds
	server      *bus.Server
	wg          sync.WaitGroup
	Workers     []*Component
	Dispatchers []*Component
	Planners    []*Component
}

// Component is one dispatcher, worker or planner with its own connection.
type Component struct {
	Name   string
	Conn   *bus.Conn
	cancel context.CancelFunc
	done   chan struct{}
}

// Stop ends the component's Run (a graceful stop) and waits for it.
func (c *Component) Stop() {
	c.cancel()
	<-c.done
}

// Kill closes the component's connection at once, as if its process died:
// nothing is acknowledged or drained. Its Run goroutine then winds down on
// its own.
func (c *Component) Kill() {
	c.Conn.NC.Close()
	c.cancel()
}

// Start brings the node up and returns once every component is ready.
func Start(ctx context.Context, cfg Config, log zerolog.Logger) (*Node, error) {
	if cfg.Dispatchers == 0 && !cfg.NoDispatcher {
		cfg.Dispatchers = 1
	}
	n := &Node{Bus: cfg.Bus}
	if cfg.Auth && !cfg.Bus.Embedded() {
		return nil, fmt.Errorf("node: Auth configures the embedded server; to connect to %s with a role, give its seed (Bus.NKeySeedFile)", cfg.Bus.URL)
	}
	if cfg.Bus.Embedded() {
		var opts []bus.ServerOption
		if cfg.Auth {
			seeds, err := bus.EnsureSeeds(filepath.Join(cfg.Bus.Defaults().DataDir, "auth"))
			if err != nil {
				return nil, err
			}
			n.Seeds = seeds
			opts = append(opts, bus.ServerAuth(seeds))
		}
		srv, err := bus.StartServer(ctx, cfg.Bus, log, opts...)
		if err != nil {
			return nil, err
		}
		n.server = srv
		n.Bus.URL = srv.ClientURL()
	}
	fail := func(err error) (*Node, error) {
		n.Stop()
		return nil, err
	}
	admin, err := bus.Dial(ctx, n.as(bus.RoleAdmin), log)
	if err != nil {
		return fail(err)
	}
	err = admin.Declare(ctx)
	admin.Close()
	if err != nil {
		return fail(err)
	}
	for range cfg.Dispatchers {
		if _, err := n.AddDispatcher(ctx, cfg.Dispatcher, log); err != nil {
			return fail(err)
		}
	}
	for range cfg.Workers {
		if _, err := n.AddWorker(ctx, cfg.Worker, log); err != nil {
			return fail(err)
		}
	}
	if !cfg.NoPlanner {
		if _, err := n.AddPlanner(ctx, cfg.Planner, log); err != nil {
			return fail(err)
		}
	}
	return n, nil
}

// AddPlanner starts one more planner service and waits until it is ready.
func (n *Node) AddPlanner(ctx context.Context, cfg planner.Config, log zerolog.Logger) (*Component, error) {
	c, err := n.dial(ctx, fmt.Sprintf("planner-%d", len(n.Planners)+1), bus.RolePlanner, log)
	if err != nil {
		return nil, err
	}
	if cfg.ID == "" {
		cfg.ID = c.Name
	}
	if n.Seeds != nil && cfg.ExternalPrefix == "" {
		// A request names its external planner's subject; only
		// planners.> is open to the planner role.
		cfg.ExternalPrefix = strings.TrimSuffix(bus.SubjectExternalPlanners, ">")
	}
	p, err := planner.New(c.Conn, cfg, log)
	if err != nil {
		c.Conn.Close()
		return nil, err
	}
	n.Planners = append(n.Planners, c)
	return c, n.run(ctx, c, p.Run, p.Ready())
}

// AddDispatcher starts one more dispatcher and waits until it is ready.
func (n *Node) AddDispatcher(ctx context.Context, cfg dispatcher.Config, log zerolog.Logger) (*Component, error) {
	c, err := n.dial(ctx, fmt.Sprintf("dispatcher-%d", len(n.Dispatchers)+1), bus.RoleDispatcher, log)
	if err != nil {
		return nil, err
	}
	if cfg.ID == "" {
		cfg.ID = c.Name
	}
	d, err := dispatcher.New(c.Conn, cfg, log)
	if err != nil {
		c.Conn.Close()
		return nil, err
	}
	n.Dispatchers = append(n.Dispatchers, c)
	return c, n.run(ctx, c, d.Run, d.Ready())
}

// AddWorker starts one more worker and waits until it is ready.
func (n *Node) AddWorker(ctx context.Context, cfg worker.Config, log zerolog.Logger) (*Component, error) {
	c, err := n.dial(ctx, fmt.Sprintf("worker-%d", len(n.Workers)+1), bus.RoleWorker, log)
	if err != nil {
		return nil, err
	}
	if cfg.ID == "" {
		cfg.ID = c.Name
	}
	w, err := worker.New(c.Conn.NC, cfg, worker.WithLogger(log))
	if err != nil {
		c.Conn.Close()
		return nil, err
	}
	n.Workers = append(n.Workers, c)
	return c, n.run(ctx, c, w.Run, w.Ready())
}

func (n *Node) dial(ctx context.Context, name string, role bus.Role, log zerolog.Logger) (*Component, error) {
	bc := n.as(role)
	bc.Name = "planbus-" + name
	conn, err := bus.Dial(ctx, bc, log)
	if err != nil {
		return nil, err
	}
	return &Component{Name: name, Conn: conn, done: make(chan struct{})}, nil
}

// run starts c and waits until it is ready or has failed.
func (n *Node) run(ctx context.Context, c *Component, run func(context.Context) error, ready <-chan struct{}) error {
	rctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	errc := make(chan error, 1)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer close(c.done)
		defer c.Conn.Close()
		if err := run(rctx); err != nil && !errors.Is(err, context.Canceled) {
			errc <- fmt.Errorf("%s: %w", c.Name, err)
		}
	}()
	select {
	case <-ready:
		return nil
	case err := <-errc:
		return err
	case <-ctx.Done():
		cancel()
		return ctx.Err()
	}
}

// Stop stops every component gracefully and then the embedded server.
func (n *Node) Stop() {
	for _, c := range n.Planners {
		c.cancel()
	}
	for _, c := range n.Workers {
		c.cancel()
	}
	for _, c := range n.Dispatchers {
		c.cancel()
	}
	waited := make(chan struct{})
	go func() { n.wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(time.Minute):
	}
	if n.server != nil {
		n.server.Shutdown()
	}
}

// Dial opens a new connection to the node's server; with Auth, as an
// admin.
func (n *Node) Dial(ctx context.Context, log zerolog.Logger) (*bus.Conn, error) {
	return bus.Dial(ctx, n.as(bus.RoleAdmin), log)
}

// DialAs opens a new connection to the node's server as role: with Auth,
// with the role's seed.
func (n *Node) DialAs(ctx context.Context, role bus.Role, log zerolog.Logger) (*bus.Conn, error) {
	return bus.Dial(ctx, n.as(role), log)
}

// as is the bus config of a connection of role. Without Auth the role
// only names the connection's inbox (and an admin is a plain
// connection), so a node on an external server keeps the credentials it
// was given.
func (n *Node) as(role bus.Role) bus.Config {
	bc := n.Bus
	if role != bus.RoleAdmin {
		bc.Role = role
	}
	if n.Seeds != nil {
		bc.Role = role
		bc.NKeySeedFile = n.Seeds.File(role)
	}
	return bc
}
