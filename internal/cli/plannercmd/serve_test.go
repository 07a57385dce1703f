package plannercmd

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/worker"
)

// brittle is a component that is ready at once and whose Run fails when
// fail is closed.
type brittle struct {
	ready, fail chan struct{}
}

func (b *brittle) Ready() <-chan struct{} { return b.ready }

func (b *brittle) Run(ctx context.Context) error {
	close(b.ready)
	select {
	case <-ctx.Done():
		return nil
	case <-b.fail:
		return errors.New("store unreadable")
	}
}

// serveNode starts a node like serve's (a dispatcher, a worker, the
// planner) with one brittle component more, and keeps it with keepNode in
// the background; keepNode's exit code arrives on the channel.
func serveNode(t *testing.T, ctx context.Context, logs *bustest.SyncBuffer) (*node.Node, *brittle, <-chan int) {
	t.Helper()
	n, err := node.Start(ctx, node.Config{Bus: bustest.Start(t), Workers: 1,
		Worker: worker.Config{Skills: skills.Builtins(skills.BuiltinConfig{})}}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	b := &brittle{ready: make(chan struct{}), fail: make(chan struct{})}
	if _, err := n.Add(ctx, "brittle", bus.RoleAdmin, func(*bus.Conn) (node.Runner, error) { return b, nil }, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	code := make(chan int, 1)
	go func() { code <- keepNode(ctx, n, zerolog.New(logs)) }()
	return n, b, code
}

// A component that dies makes serve log the death at error, stop the rest
// of the node and exit 1.
func TestServeStopsWhenAComponentDies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var logs bustest.SyncBuffer
	n, b, code := serveNode(t, ctx, &logs)
	close(b.fail)
	select {
	case got := <-code:
		if got != cli.ExitFailed {
			t.Errorf("exit code: got %d, want %d", got, cli.ExitFailed)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve still up 10 s after a component died")
	}
	var line struct{ Level, Error, Message string }
	if err := json.Unmarshal([]byte(strings.TrimSpace(logs.String())), &line); err != nil {
		t.Fatalf("log %q: %v", logs.String(), err)
	}
	if line.Level != "error" || !strings.Contains(line.Error, "brittle") || !strings.Contains(line.Error, "store unreadable") {
		t.Errorf("log: got %+v, want an error naming brittle and its cause", line)
	}
	// The rest of the node is stopped: the planner's connection is closed.
	if !n.Planners[0].Conn.NC.IsClosed() {
		t.Error("the planner still runs after serve gave up")
	}
}

// An interrupt stops serve with exit 0.
func TestServeStopsOnInterrupt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	sctx, interrupt := context.WithCancel(ctx)
	var logs bustest.SyncBuffer
	_, _, code := serveNode(t, sctx, &logs)
	interrupt()
	select {
	case got := <-code:
		if got != cli.ExitOK {
			t.Errorf("exit code: got %d, want %d (log: %s)", got, cli.ExitOK, logs.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("serve still up a minute after the interrupt")
	}
	if strings.Contains(logs.String(), `"level":"error"`) {
		t.Errorf("an interrupt logged an error: %s", logs.String())
	}
}
