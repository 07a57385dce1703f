package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

// workerGoroutines returns the stacks of goroutines running the worker's
// pull loops, call runners or heartbeats.
func workerGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "planbus/worker.(*Worker).pull") || strings.Contains(g, "planbus/worker.(*Worker).heartbeats") {
			out = append(out, g)
		}
	}
	return out
}

// A worker whose last start-up step fails returns the error and leaves
// nothing behind: no pull loop asking for calls, no heartbeats, no
// service, and it never says it is ready.
func TestRunThatCannotStartLeavesNothingRunning(t *testing.T) {
	e := newEnv(t)
	e.eventually("no worker goroutines from earlier tests", func(context.Context) (bool, string) {
		g := workerGoroutines()
		return len(g) == 0, strings.Join(g, "\n\n")
	})
	conn := bustest.Dial(t, e.cfg)
	w, err := worker.New(conn.NC, worker.Config{Skills: []skill.Skill{skills.Echo()}, AckWait: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	unanswered := errors.New("the server did not answer the flush")
	worker.SetFlush(w, func() error { return unanswered })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // Run's context stays live: whatever it started must stop on its own
	if err := w.Run(ctx); !errors.Is(err, unanswered) {
		t.Fatalf("Run: %v, want the flush's error", err)
	}
	select {
	case <-w.Ready():
		t.Error("Ready is closed, but the worker never served")
	default:
	}
	e.eventually("no pull loop or heartbeat left running", func(context.Context) (bool, string) {
		g := workerGoroutines()
		return len(g) == 0, strings.Join(g, "\n\n")
	})
	e.waitConsumer("echo", func(ci *jetstream.ConsumerInfo) bool { return ci.NumWaiting == 0 })
	if _, err := e.conn.NC.Request("$SRV.PING."+bus.ServiceToolworker, nil, wait); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("ping of the service: %v, want no responders", err)
	}
	if err := w.Run(ctx); !errors.Is(err, worker.ErrRunTwice) {
		t.Errorf("Run again: %v, want ErrRunTwice", err)
	}
}

// lines is a log writer that hands each line to the test.
type lines chan []byte

func (l lines) Write(p []byte) (int, error) {
	l <- bytes.Clone(p)
	return len(p), nil
}

// Handlers log through skill.Log, and each line says which call it was
// about and which worker ran it.
func TestHandlersGetTheCallsLogger(t *testing.T) {
	e := newEnv(t)
	logs := make(lines, 256)
	talker := skillOf("talker", func(ctx context.Context, call *skill.Call) (skill.Result, error) {
		skill.Log(ctx).Warn("talking", "said", "hello")
		return skill.Result{Output: call.Input}, nil
	})
	e.startWorker(worker.Config{ID: "w-log", Skills: []skill.Skill{talker}}, worker.WithLogger(jsonLog(logs, slog.LevelWarn)))
	tc := newCall("p-log", "speak", "talker", `{}`)
	tc.Attempt, tc.MaxAttempts = 2, 3
	e.publish(tc)
	if res, _ := e.result("p-log"); res.State != planbus.ToolSucceeded {
		t.Fatalf("result %s %+v", res.State, res.Error)
	}
	lineHas(t, logs, "talking", map[string]any{"plan_id": "p-log", "tool_id": "speak", "skill": "talker", "attempt": 2.0,
		"worker": "w-log", "component": "toolworker", "said": "hello"})
}

// lineHas reads log lines until one with message, and checks its fields.
func lineHas(t *testing.T, logs lines, message string, want map[string]any) {
	t.Helper()
	var line map[string]any
	for line == nil || line[slog.MessageKey] != message {
		line = nil
		if err := json.Unmarshal(receive(t, (<-chan []byte)(logs), "the log line "+message), &line); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("log line %v: %s = %v, want %v", line, k, line[k], v)
		}
	}
}

// The worker's own lines about a call name the call and its skill too.
func TestWorkerLinesNameTheCall(t *testing.T) {
	e := newEnv(t)
	logs := make(lines, 256)
	e.startWorker(worker.Config{ID: "w-own", Skills: []skill.Skill{skills.Echo()}}, worker.WithLogger(jsonLog(logs, slog.LevelDebug)))
	tc := newCall("p-own", "say", "echo", `{}`)
	tc.Attempt, tc.MaxAttempts = 3, 3
	e.publish(tc)
	if res, _ := e.result("p-own"); res.State != planbus.ToolSucceeded {
		t.Fatalf("result %s %+v", res.State, res.Error)
	}
	lineHas(t, logs, "call finished", map[string]any{"plan_id": "p-own", "tool_id": "say", "skill": "echo", "attempt": 3.0,
		"state": "succeeded", "worker": "w-own"})
}

// Middleware given to the worker wraps every call, inside the logger, the
// recovery and the timeout and outside the input check.
func TestWithMiddlewareWrapsEveryCall(t *testing.T) {
	e := newEnv(t)
	seen := make(chan string, 16)
	tag := func(next skill.Handler) skill.Handler {
		return skill.HandlerFunc(func(ctx context.Context, call *skill.Call) (skill.Result, error) {
			if !skill.Log(ctx).Enabled(ctx, slog.LevelInfo) {
				seen <- "no logger"
			}
			res, err := next.Handle(ctx, call)
			seen <- call.ToolID + " " + errorOf(err)
			return res, err
		})
	}
	e.startWorker(worker.Config{Skills: []skill.Skill{skills.Sleep()}}, worker.WithLogger(jsonLog(io.Discard, slog.LevelInfo)), worker.WithMiddleware(tag))
	e.publish(newCall("p1", "ok", "sleep", `{"ms":1}`))
	e.publish(newCall("p2", "bad", "sleep", `{"ms":-1}`))
	got := map[string]bool{}
	for range 2 {
		got[receive(t, (<-chan string)(seen), "the middleware seeing a call")] = true
	}
	for _, want := range []string{"ok <nil>", "bad INVALID_INPUT"} {
		if !got[want] {
			t.Errorf("middleware saw %v, want %q among them", got, want)
		}
	}
}

// The call's deadline bounds the worker's middleware too: a rate limit
// that holds a call past it times the call out, as the plan asked.
func TestTheDeadlineBoundsMiddleware(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	holding := func(next skill.Handler) skill.Handler {
		return skill.HandlerFunc(func(ctx context.Context, call *skill.Call) (skill.Result, error) {
			<-release // a limiter that ignores ctx
			return next.Handle(ctx, call)
		})
	}
	e.startWorker(worker.Config{Skills: []skill.Skill{skills.Echo()}}, worker.WithMiddleware(holding))
	tc := newCall("p-held", "t", "echo", `{}`)
	tc.TimeoutMs = 200
	e.publish(tc)
	if res, _ := e.result("p-held"); res.State != planbus.ToolTimeout || errorCode(res) != planbus.CodeToolTimeout {
		t.Errorf("result %s %s, want a TOOL_TIMEOUT timeout", res.State, errorCode(res))
	}
}

func errorOf(err error) string {
	if err == nil {
		return "<nil>"
	}
	info, _ := skill.ErrorInfo(err)
	return string(info.Code)
}

// With authorization on, a worker connected the way a user's program does
// (nats.Connect with the worker role's nkey and RoleInbox) serves calls.
func TestWorkerRoleWithRoleInbox(t *testing.T) {
	cfg, seeds := bustest.StartAuth(t)
	nkey, err := nats.NkeyOptionFromSeed(seeds.File(bus.RoleWorker))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(cfg.URL, nkey, worker.RoleInbox())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	admin := cfg
	admin.NKeySeedFile, admin.Role = seeds.File(bus.RoleAdmin), bus.RoleAdmin
	e := &env{t: t, cfg: admin, conn: bustest.Dial(t, admin)}
	e.startWorkerOn(nc, worker.Config{Skills: []skill.Skill{skills.Echo()}})
	e.publish(newCall("p-auth", "t", "echo", `{"role":"worker"}`))
	if res, _ := e.result("p-auth"); res.State != planbus.ToolSucceeded || string(res.Output) != `{"role":"worker"}` {
		t.Errorf("result %s %s %+v, want succeeded", res.State, res.Output, res.Error)
	}
}
