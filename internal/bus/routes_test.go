package bus_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
)

// freePort is a port on 127.0.0.1 nothing listens on just now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startFromConfig runs a nats-server from a configuration file.
func startFromConfig(t *testing.T, conf string) *server.Server {
	t.Helper()
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("nats-server refuses %s: %v", conf, err)
	}
	opts.NoLog, opts.NoSigs = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatalf("server of %s not ready", conf)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// The routes auth init writes let the cluster's nodes join one another and
// no one else: a server that reaches a node's cluster port without the
// password is refused, where before it joined and was trusted with
// everything.
func TestRoutesAreAuthenticated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	if _, err := bus.EnsureSeeds(dir); err != nil {
		t.Fatal(err)
	}
	secret, err := bus.EnsureRouteSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := bus.EnsureRouteSecret(dir); err != nil || again != secret {
		t.Errorf("second run: %q %v, want the secret kept", again, err)
	}
	p1, p2 := freePort(t), freePort(t)
	routes, err := bus.NATSRoutesConfig(secret, []string{fmt.Sprintf("127.0.0.1:%d", p1), fmt.Sprintf("127.0.0.1:%d", p2)})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "routes.conf"), routes, 0o644); err != nil {
		t.Fatal(err)
	}
	node := func(name string, cluster int, routesInclude string) string {
		conf := filepath.Join(filepath.Dir(dir), name+".conf")
		body := fmt.Sprintf("server_name: %s\nlisten: 127.0.0.1:-1\ncluster {\n  name: planbus\n  listen: 127.0.0.1:%d\n  %s\n}\n", name, cluster, routesInclude)
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return conf
	}
	n1 := startFromConfig(t, node("n1", p1, "include ./auth/routes.conf"))
	n2 := startFromConfig(t, node("n2", p2, "include ./auth/routes.conf"))
	waitRoutes := func(what string, ok func() bool) {
		t.Helper()
		bustest.Eventually(t, time.Minute, what, func() (bool, string) {
			return ok(), fmt.Sprintf("routes n1 %d, n2 %d", n1.NumRoutes(), n2.NumRoutes())
		})
	}
	waitRoutes("the two nodes joining", func() bool { return n1.NumRoutes() > 0 && n2.NumRoutes() > 0 })
	refusals := &refusalLog{seen: make(chan struct{}, 64)}
	n1.SetLogger(refusals, false, false)

	// A server that reaches n1's cluster port without the password, and
	// one that guesses a password.
	rogue := startFromConfig(t, node("rogue", freePort(t), fmt.Sprintf("routes: [\"nats://127.0.0.1:%d\"]", p1)))
	guess := startFromConfig(t, node("guess", freePort(t), fmt.Sprintf("routes: [\"nats://%s:wrong@127.0.0.1:%d\"]", bus.RouteUser, p1)))
	for range 2 {
		select {
		case <-refusals.seen:
		case <-time.After(10 * time.Second):
			t.Fatalf("n1 did not refuse both routes within 10 s: rogue %d routes, guess %d", rogue.NumRoutes(), guess.NumRoutes())
		}
	}
	// A refused route may still count on its own side until the close
	// reaches it; it must not last.
	waitRoutes("the refused routes closing", func() bool { return rogue.NumRoutes() == 0 && guess.NumRoutes() == 0 })
	// n1's routes (one, or a pool of several) all lead to n2.
	rz, err := n1.Routez(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rz.Routes {
		if r.RemoteID != n2.ID() {
			t.Errorf("n1 has a route to %s (%s), not to n2", r.RemoteID, r.RemoteName)
		}
	}

	if err := os.Chmod(filepath.Join(dir, bus.RouteSecretFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.EnsureRouteSecret(dir); err == nil || !strings.Contains(err.Error(), "may be read by others") {
		t.Errorf("a secret others may read: %v, want it refused", err)
	}
	if _, err := bus.NATSRoutesConfig(secret, []string{"nats1"}); err == nil {
		t.Error("a route without a port was taken")
	}
}

// refusalLog is a nats-server logger that signals each route refused for
// its credentials.
type refusalLog struct{ seen chan struct{} }

func (l *refusalLog) note(format string, v ...any) {
	if strings.Contains(fmt.Sprintf(format, v...), "Authentication Failure") {
		select {
		case l.seen <- struct{}{}:
		default:
		}
	}
}

func (l *refusalLog) Noticef(format string, v ...any) { l.note(format, v...) }
func (l *refusalLog) Warnf(format string, v ...any)   { l.note(format, v...) }
func (l *refusalLog) Fatalf(format string, v ...any)  { l.note(format, v...) }
func (l *refusalLog) Errorf(format string, v ...any)  { l.note(format, v...) }
func (l *refusalLog) Debugf(format string, v ...any)  { l.note(format, v...) }
func (l *refusalLog) Tracef(format string, v ...any)  { l.note(format, v...) }
