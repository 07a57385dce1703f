package node

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/dispatcher"
	"github.com/planbus/planbus/internal/embedded"
	"github.com/planbus/planbus/internal/logbridge"
	"github.com/planbus/planbus/internal/metrics"
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
	// Metrics, when set, is the process's registry: every component the
	// node starts records its metrics there (a dispatcher or planner
	// config that names a registry of its own keeps it).
	Metrics *metrics.Registry
}

// Node is a running set of components. Its methods may be called from any
// goroutine, except that Add* and Stop must not run at the same time.
type Node struct {
	Bus bus.Config // with the URL of the server in use
	// Seeds are the roles' seed files when Config.Auth is on, else nil.
	Seeds       *bus.Seeds
	server      *embedded.Server
	metrics     *metrics.Registry
	wg          sync.WaitGroup
	Workers     []*Component
	Dispatchers []*Component
	Planners    []*Component
	// Others are the components started with Add.
	Others []*Component

	svcMu    sync.Mutex
	services []*planner.Service // the planners', for GenerationMemory

	died    chan struct{} // closed when the first component dies
	dieOnce sync.Once
	err     error // why; written once, before died is closed
}

// Runner is what a component is: Run serves until its ctx ends and
// returns nil then; Ready is closed once it serves. planner.Service,
// dispatcher.Dispatcher and worker.Worker are Runners.
type Runner interface {
	Run(ctx context.Context) error
	Ready() <-chan struct{}
}

// Component is one dispatcher, worker, planner or other Runner with its
// own connection.
type Component struct {
	Name   string
	Conn   *bus.Conn
	cancel context.CancelFunc
	done   chan struct{}
	// asked is set before the component is told to end (Stop, Kill, the
	// node's Stop), so that its end is not taken for a death.
	asked atomic.Bool
}

// Stop ends the component's Run (a graceful stop) and waits for it.
func (c *Component) Stop() {
	c.asked.Store(true)
	c.cancel()
	<-c.done
}

// Kill closes the component's connection at once, as if its process died:
// nothing is acknowledged or drained. Its Run goroutine then winds down on
// its own. A killed component is not reported by the node's Done and Err.
func (c *Component) Kill() {
	c.asked.Store(true)
	c.Conn.NC.Close()
	c.cancel()
}

// Done returns a channel that is closed when a component of the node has
// died: its Run returned, with an error or without, after it was ready and
// without being asked to (Stop, Kill or the node's Stop). Whoever runs the
// node should then stop it: the node goes on without the dead component,
// doing less than it was configured to. Err tells which and why.
func (n *Node) Done() <-chan struct{} {
	return n.died
}

// Err is nil until Done is closed; then it is the error of the first
// component that died, naming it (ErrComponentDied when its Run returned
// nil).
func (n *Node) Err() error {
	select {
	case <-n.died:
		return n.err
	default:
		return nil
	}
}

// ErrComponentDied is the cause Err reports for a component whose Run
// returned nil before it was asked to end.
var ErrComponentDied = errors.New("node: component ended on its own")

// die records the first component's death and closes Done.
func (n *Node) die(err error) {
	n.dieOnce.Do(func() {
		n.err = err
		close(n.died)
	})
}

// Start brings the node up and returns once every component is ready.
func Start(ctx context.Context, cfg Config, log zerolog.Logger) (*Node, error) {
	if cfg.Dispatchers == 0 && !cfg.NoDispatcher {
		cfg.Dispatchers = 1
	}
	n := &Node{Bus: cfg.Bus, died: make(chan struct{}), metrics: cfg.Metrics}
	if cfg.Auth && !cfg.Bus.Embedded() {
		return nil, fmt.Errorf("node: Auth configures the embedded server; to connect to %s with a role, give its seed (Bus.NKeySeedFile)", cfg.Bus.URL)
	}
	if cfg.Bus.Embedded() {
		var opts []embedded.Option
		if cfg.Auth {
			seeds, err := bus.EnsureSeeds(filepath.Join(cfg.Bus.Defaults().DataDir, "auth"))
			if err != nil {
				return nil, err
			}
			n.Seeds = seeds
			opts = append(opts, embedded.Auth(seeds))
		}
		if n.Bus.WriteBehind == 0 {
			// Plan state and tool calls are derived again after a crash
			// (bus.Config.WriteBehind).
			n.Bus.WriteBehind = n.Bus.Defaults().Sync.WriteBehind()
		}
		srv, err := embedded.Start(ctx, n.Bus, log, opts...)
		if err != nil {
			return nil, err
		}
		n.server = srv
		n.Bus.URL = srv.ClientURL()
		n.Bus.InProcess = srv
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
	// The components take the system's settings Declare found.
	n.Bus.Replicas, n.Bus.Retention = admin.Config.Replicas, admin.Config.Retention
	n.Bus.Partitions, n.Bus.KeepEvents = admin.Config.Partitions, admin.Config.KeepEvents
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

// Add starts one more component, named name, on a connection of its own
// as role: build makes it from the connection. Add returns once the
// component is ready, or with the error that kept it from getting there
// (the connection is then closed). A component that dies later is
// reported by Done and Err.
func (n *Node) Add(ctx context.Context, name string, role bus.Role, build func(*bus.Conn) (Runner, error), log zerolog.Logger) (*Component, error) {
	c, err := n.dial(ctx, name, role, log)
	if err != nil {
		return nil, err
	}
	r, err := build(c.Conn)
	if err != nil {
		c.Conn.Close()
		return nil, err
	}
	n.Others = append(n.Others, c)
	return c, n.run(ctx, c, r.Run, r.Ready())
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
	if cfg.Metrics == nil {
		cfg.Metrics = n.metrics
	}
	p, err := planner.New(c.Conn, cfg, log)
	if err != nil {
		c.Conn.Close()
		return nil, err
	}
	n.Planners = append(n.Planners, c)
	n.svcMu.Lock()
	n.services = append(n.services, p)
	n.svcMu.Unlock()
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
	if cfg.Metrics == nil {
		cfg.Metrics = n.metrics
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
	opts := []worker.Option{worker.WithLogger(logbridge.Slog(log))}
	if n.metrics != nil {
		opts = append(opts, worker.WithMiddleware(n.metrics.Worker().Middleware()))
	}
	w, err := worker.New(c.Conn.NC, cfg, opts...)
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

// run starts c and waits until it is ready or has failed. Once c is
// ready, its end is the node's business: if nobody asked for it, the node
// reports it (Done, Err).
func (n *Node) run(ctx context.Context, c *Component, run func(context.Context) error, ready <-chan struct{}) error {
	rctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	errc := make(chan error, 1)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer close(c.done)
		defer c.Conn.Close()
		err := run(rctx)
		select {
		case <-ready:
		default:
			// It never served: Add* returns the error to its caller.
			if err == nil {
				err = ErrComponentDied
			}
			errc <- fmt.Errorf("%s: %w", c.Name, err)
			return
		}
		if c.asked.Load() {
			return
		}
		if err == nil {
			err = ErrComponentDied
		}
		n.die(fmt.Errorf("node: %s died: %w", c.Name, err))
	}()
	select {
	case <-ready:
		return nil
	case err := <-errc:
		return err
	case <-ctx.Done():
		c.asked.Store(true)
		cancel()
		return ctx.Err()
	}
}

// Stop stops every component gracefully and then the embedded server.
func (n *Node) Stop() {
	for _, group := range [][]*Component{n.Others, n.Planners, n.Workers, n.Dispatchers} {
		for _, c := range group {
			c.asked.Store(true)
			c.cancel()
		}
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

// GenerationMemory is the memory budgets of the generations the node's
// planners run now, in bytes.
func (n *Node) GenerationMemory() int64 {
	n.svcMu.Lock()
	defer n.svcMu.Unlock()
	var b int64
	for _, p := range n.services {
		b += p.GenerationMemory()
	}
	return b
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
