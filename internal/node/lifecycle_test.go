package node_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bench"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/worker"
)

// errBoom is what a doomed component's Run returns.
var errBoom = errors.New("boom")

// doomed is a component that serves on its connection until a message on
// its subject tells it to end its Run: with the message's text as its
// error, or with nil when the text is empty. Before it is ready it may be
// told to fail at once (early).
type doomed struct {
	conn     *bus.Conn
	subject  string
	early    error
	ready    chan struct{}
	returned chan struct{}
}

func newDoomed(conn *bus.Conn, subject string) *doomed {
	return &doomed{conn: conn, subject: subject, ready: make(chan struct{}), returned: make(chan struct{})}
}

func (d *doomed) Ready() <-chan struct{} { return d.ready }

func (d *doomed) Run(ctx context.Context) error {
	defer close(d.returned)
	if d.early != nil {
		return d.early
	}
	told := make(chan string, 1)
	sub, err := d.conn.NC.Subscribe(d.subject, func(m *nats.Msg) {
		select {
		case told <- string(m.Data):
		default:
		}
	})
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := d.conn.NC.Flush(); err != nil {
		return err
	}
	close(d.ready)
	select {
	case <-ctx.Done():
		return nil
	case text := <-told:
		if text == "" {
			return nil
		}
		return fmt.Errorf("%s: %w", text, errBoom)
	}
}

// startNode runs a node with a dispatcher, a worker and a planner on a
// test server.
func startNode(t *testing.T) (*node.Node, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	n, err := node.Start(ctx, node.Config{
		Bus:     bustest.Start(t),
		Workers: 1,
		Worker:  worker.Config{Skills: skills.Builtins(skills.BuiltinConfig{})},
	}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	return n, ctx
}

// addDoomed starts a doomed component named name on n.
func addDoomed(t *testing.T, ctx context.Context, n *node.Node, name string) (*node.Component, *doomed) {
	t.Helper()
	var d *doomed
	c, err := n.Add(ctx, name, bus.RoleAdmin, func(conn *bus.Conn) (node.Runner, error) {
		d = newDoomed(conn, "test.doom."+name)
		return d, nil
	}, zerolog.Nop())
	if err != nil {
		t.Fatalf("add %s: %v", name, err)
	}
	return c, d
}

// tell publishes text to the doomed component's subject.
func tell(t *testing.T, n *node.Node, d *doomed, text string) {
	t.Helper()
	conn, err := n.Dial(context.Background(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.NC.Publish(d.subject, []byte(text)); err != nil {
		t.Fatal(err)
	}
	if err := conn.NC.Flush(); err != nil {
		t.Fatal(err)
	}
}

// A component whose Run fails after it was ready is reported by Done and
// Err, with its name and its error; so is one whose Run returns nil
// without being asked to end.
func TestNodeReportsAComponentThatDiesAfterItStarted(t *testing.T) {
	for _, tt := range []struct {
		name, text string
		want       error
	}{
		{"fails", "disk on fire", errBoom},
		{"returns", "", node.ErrComponentDied},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, ctx := startNode(t)
			_, d := addDoomed(t, ctx, n, "doomed")
			if err := n.Err(); err != nil {
				t.Fatalf("Err before any death: got %v, want nil", err)
			}
			select {
			case <-n.Done():
				t.Fatal("Done closed before any death")
			default:
			}
			tell(t, n, d, tt.text)
			select {
			case <-n.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("Done not closed 10 s after the component died")
			}
			err := n.Err()
			if !errors.Is(err, tt.want) {
				t.Fatalf("Err: got %v, want one wrapping %v", err, tt.want)
			}
			for _, part := range []string{"doomed", tt.text} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("Err %q does not name %q", err, part)
				}
			}
			// The others still run until the node's owner stops them.
			if err := n.Workers[0].Conn.NC.LastError(); err != nil || n.Workers[0].Conn.NC.IsClosed() {
				t.Errorf("the worker's connection: closed %v, error %v; want it open", n.Workers[0].Conn.NC.IsClosed(), err)
			}
		})
	}
}

// Only the first death is reported.
func TestNodeReportsTheFirstDeath(t *testing.T) {
	n, ctx := startNode(t)
	_, first := addDoomed(t, ctx, n, "first")
	_, second := addDoomed(t, ctx, n, "second")
	tell(t, n, first, "first cause")
	<-first.returned
	select {
	case <-n.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed 10 s after the first death")
	}
	tell(t, n, second, "second cause")
	<-second.returned
	n.Stop() // waits for every component's goroutine
	if err := n.Err(); err == nil || !strings.Contains(err.Error(), "first cause") || strings.Contains(err.Error(), "second") {
		t.Errorf("Err: got %v, want the first component's death only", err)
	}
}

// Ends that were asked for are no deaths: Stop, Kill and the node's Stop.
func TestNodeDoesNotReportEndsItAskedFor(t *testing.T) {
	n, ctx := startNode(t)
	stopped, sd := addDoomed(t, ctx, n, "stopped")
	killed, kd := addDoomed(t, ctx, n, "killed")
	addDoomed(t, ctx, n, "last")
	stopped.Stop()
	<-sd.returned
	killed.Kill()
	<-kd.returned
	n.Stop()
	n.Workers[0].Stop() // again: a no-op
	select {
	case <-n.Done():
		t.Fatalf("Done closed by ends that were asked for: %v", n.Err())
	default:
	}
	if err := n.Err(); err != nil {
		t.Errorf("Err: got %v, want nil", err)
	}
}

// A component that fails before it is ready makes Add fail, naming it,
// and is no death of the node.
func TestNodeAddReturnsAnEarlyFailure(t *testing.T) {
	n, ctx := startNode(t)
	_, err := n.Add(ctx, "early", bus.RoleAdmin, func(conn *bus.Conn) (node.Runner, error) {
		d := newDoomed(conn, "test.doom.early")
		d.early = errBoom
		return d, nil
	}, zerolog.Nop())
	if !errors.Is(err, errBoom) || !strings.Contains(err.Error(), "early") {
		t.Fatalf("Add: got %v, want an error naming early and wrapping %v", err, errBoom)
	}
	_, err = n.Add(ctx, "unbuilt", bus.RoleAdmin, func(*bus.Conn) (node.Runner, error) {
		return nil, errBoom
	}, zerolog.Nop())
	if !errors.Is(err, errBoom) {
		t.Fatalf("Add with a failing build: got %v, want %v", err, errBoom)
	}
	n.Stop()
	if err := n.Err(); err != nil {
		t.Errorf("Err: got %v, want nil", err)
	}
}

// A node started on a running system without its settings runs with the
// system's: its dispatchers consume the partitions the streams have.
func TestNodeTakesTheRunningSystemsSettings(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := bustest.StartBare(t)
	first := bustest.Dial(t, cfg)
	first.Config.Partitions, first.Config.Retention = 3, 10*time.Minute
	if err := first.Declare(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := node.Start(ctx, node.Config{Bus: cfg, NoPlanner: true}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	if n.Bus.Partitions != 3 || n.Bus.Retention != 10*time.Minute {
		t.Errorf("the node runs with %d partitions and a %s retention, want the system's 3 and 10m", n.Bus.Partitions, n.Bus.Retention)
	}
	if err := bench.Settle(ctx, first.NC, 1, 3); err != nil {
		t.Fatalf("the node's dispatcher does not own the system's 3 partitions: %v", err)
	}
}
