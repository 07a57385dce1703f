// Package embedded runs the NATS JetStream server planbus embeds (planner
// serve, planner run, the tests), apart from package bus so that what
// only connects to a server (workers, clients) does not link one.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bus"
)

// ErrListen means the embedded server could not take its address.
var ErrListen = errors.New("embedded: cannot listen")

// ErrDataDirInUse means another embedded server holds the data dir.
var ErrDataDirInUse = errors.New("embedded: data dir in use")

// Server is an embedded NATS server with JetStream.
type Server struct {
	ns   *server.Server
	lock *dirLock
}

// Option adjusts the embedded server's options beyond the config:
// authentication (Auth), or TLS in tests.
type Option func(*server.Options)

// Start starts an embedded JetStream server on cfg.Listen with its store
// in cfg.DataDir, and returns once it accepts connections. Stop it with
// Shutdown.
func Start(ctx context.Context, cfg bus.Config, log zerolog.Logger, extra ...Option) (*Server, error) {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	host, portStr, _ := net.SplitHostPort(cfg.Listen)
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("%w: Listen: port %q is not a number", bus.ErrInvalidConfig, portStr)
	}
	if port != 0 {
		// The server reports a taken port only through its logger; try it
		// first so the user gets a plain answer.
		l, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("%w on %s: %v (is another planbus or NATS server running there? connect to it with --nats-url nats://%s, or pick another --listen)",
				ErrListen, cfg.Listen, err, cfg.Listen)
		}
		_ = l.Close()
	} else {
		port = server.RANDOM_PORT
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("embedded: data dir: %w", err)
	}
	// Two servers writing one store corrupt it: the first to start holds
	// the dir, the second is refused before it touches anything.
	lock, err := lockDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			lock.unlock()
		}
	}()
	sync := cfg.Sync.FlushInterval()
	if cfg.Sync.Always && cfg.WriteBehind > 0 {
		// What is written behind is on disk within WriteBehind.
		sync = cfg.WriteBehind / 2
	}
	opts := &server.Options{
		ServerName:            "planbus",
		Host:                  host,
		Port:                  port,
		JetStream:             true,
		StoreDir:              cfg.DataDir,
		MaxPayload:            cfg.MaxPayload,
		NoSigs:                true,
		DisableShortFirstPing: true,
		SyncAlways:            cfg.Sync.Always,
		SyncInterval:          sync,
	}
	for _, o := range extra {
		o(opts)
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded: server: %w", err)
	}
	ns.SetLoggerV2(serverLogger{log.With().Str("component", "nats-server").Logger()}, false, false, false)
	go ns.Start()
	deadline := 15 * time.Second
	if d, ok := ctx.Deadline(); ok {
		deadline = time.Until(d)
	}
	if !ns.ReadyForConnections(deadline) {
		ns.Shutdown()
		return nil, fmt.Errorf("%w on %s: the embedded server did not become ready within %s", ErrListen, cfg.Listen, deadline)
	}
	started = true
	return &Server{ns: ns, lock: lock}, nil
}

// ClientURL is the URL clients connect to.
func (s *Server) ClientURL() string { return s.ns.ClientURL() }

// InProcessConn is a connection to the server through memory, for clients
// in the same process (Config.InProcess).
func (s *Server) InProcessConn() (net.Conn, error) { return s.ns.InProcessConn() }

// Shutdown stops the server and waits until it is down.
func (s *Server) Shutdown() {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
	s.lock.unlock()
}

// serverLogger forwards the server's log to zerolog. Notices are debug
// output: a user of planbus cares about planbus's own log.
type serverLogger struct{ log zerolog.Logger }

func (l serverLogger) Noticef(format string, v ...any) { l.log.Debug().Msgf(format, v...) }
func (l serverLogger) Warnf(format string, v ...any)   { l.log.Warn().Msgf(format, v...) }
func (l serverLogger) Fatalf(format string, v ...any)  { l.log.Error().Msgf(format, v...) }
func (l serverLogger) Errorf(format string, v ...any)  { l.log.Error().Msgf(format, v...) }
func (l serverLogger) Debugf(format string, v ...any)  { l.log.Trace().Msgf(format, v...) }
func (l serverLogger) Tracef(format string, v ...any)  { l.log.Trace().Msgf(format, v...) }
