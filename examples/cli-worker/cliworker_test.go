//go:build unix

// Package cliworker_test runs examples/cli-worker, a planbus worker made of
// the stock nats CLI and a shell script, against `planner serve`: the proof
// that docs/protocol.md is enough to write a worker without planbus's Go
// code. The tests need the nats CLI (on PATH or in $(go env GOPATH)/bin),
// jq and coreutils; without them they skip, unless
// PLANBUS_REQUIRE_NATS_CLI=1 (as in CI), when they fail.
package cliworker_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/cli/plannercmd"
	"github.com/planbus/planbus/internal/token"
	"github.com/planbus/planbus/schemas"
)

// wait bounds every wait of these tests; what passes takes a few seconds.
const wait = time.Minute

// tools finds the nats CLI and the programs worker.sh needs, and returns
// the PATH to run it with.
func tools(t *testing.T) string {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("PLANBUS_REQUIRE_NATS_CLI") == "1" {
			t.Fatalf(format+" (PLANBUS_REQUIRE_NATS_CLI=1)", args...)
		}
		t.Skipf(format+"; install it to run this test (go install github.com/nats-io/natscli/nats@v0.5.0)", args...)
	}
	natsBin, err := exec.LookPath("nats")
	if err != nil {
		if out, gerr := exec.Command("go", "env", "GOPATH").Output(); gerr == nil {
			for _, dir := range filepath.SplitList(strings.TrimSpace(string(out))) {
				if p := filepath.Join(dir, "bin", "nats"); isExecutable(p) {
					natsBin = p
					break
				}
			}
		}
	}
	if natsBin == "" {
		missing("the nats CLI is neither on PATH nor in $(go env GOPATH)/bin")
	}
	path := filepath.Dir(natsBin) + string(os.PathListSeparator) + os.Getenv("PATH")
	for _, tool := range []string{"sh", "jq", "sha256sum", "base64", "od"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing("%s is not on PATH", tool)
		}
	}
	return path
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// lines collects a process's output line by line and lets a test wait
// for a line.
type lines struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced on every line and at EOF
	eof     bool
}

func newLines(r io.Reader) *lines {
	l := &lines{changed: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			l.mu.Lock()
			l.buf.Write(sc.Bytes())
			l.buf.WriteByte('\n')
			close(l.changed)
			l.changed = make(chan struct{})
			l.mu.Unlock()
		}
		l.mu.Lock()
		l.eof = true
		close(l.changed)
		l.mu.Unlock()
	}()
	return l
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// waitFor waits until some line contains s and returns that line.
func (l *lines) waitFor(t *testing.T, what, s string) string {
	t.Helper()
	deadline := time.After(wait)
	for {
		l.mu.Lock()
		for _, line := range strings.Split(l.buf.String(), "\n") {
			if strings.Contains(line, s) {
				l.mu.Unlock()
				return line
			}
		}
		changed, eof := l.changed, l.eof
		l.mu.Unlock()
		if eof {
			t.Fatalf("%s: output ended without %q:\n%s", what, s, l.String())
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%s: no %q within %s:\n%s", what, s, wait, l.String())
		}
	}
}

// node is a `planner serve` running in the test's process.
type node struct {
	url, dataDir string
}

// serve runs `planner serve` on a free port until the test ends.
func serve(t *testing.T, args ...string) node {
	t.Helper()
	dataDir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	args = append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--log-format", "json", "--workers", "1"}, args...)
	exited := make(chan int, 1)
	go func() {
		exited <- plannercmd.Run(ctx, args, cli.IO{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: pw,
			Env: func(string) string { return "" }})
		_ = pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-exited; code != cli.ExitOK {
			t.Errorf("planner serve exited %d after its context ended", code)
		}
	})
	logs := newLines(pr)
	var rec struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal([]byte(logs.waitFor(t, "planner serve", `"planbus node up`)), &rec); err != nil || rec.URL == "" {
		t.Fatalf("planner serve: no url in its up line: %v\n%s", err, logs.String())
	}
	return node{url: rec.URL, dataDir: dataDir}
}

// worker is examples/cli-worker's worker.sh serving upper.
type worker struct {
	cmd    *exec.Cmd
	stderr *lines
	done   chan struct{}
}

// startWorker starts worker.sh upper.json ./upper.sh against url with the
// extra environment, waits until it serves, and stops it when the test
// ends: SIGTERM, which it answers after the call it holds, and SIGKILL of
// its process group if that takes too long.
func startWorker(t *testing.T, path, url string, env ...string) *worker {
	t.Helper()
	home := t.TempDir() // no nats CLI contexts of the user's
	cmd := exec.Command("sh", "worker.sh", "upper.json", "./upper.sh")
	cmd.Env = append([]string{"PATH=" + path, "HOME=" + home, "XDG_CONFIG_HOME=" + home, "TMPDIR=" + t.TempDir(),
		"NATS_URL=" + url, "PLANBUS_WORKER_ID=cli-test-worker"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &worker{cmd: cmd, stderr: newLines(stderr), done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(w.done) }()
	t.Cleanup(func() { w.stop(t) })
	w.stderr.waitFor(t, "worker.sh", "serving skill upper")
	return w
}

func (w *worker) stop(t *testing.T) {
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(20 * time.Second):
		t.Errorf("worker.sh did not stop within 20s of SIGTERM; killing it\n%s", w.stderr.String())
		w.kill()
		return
	}
	// It leaves nothing running: every process it started is gone once
	// the last heartbeat or acknowledgement it sent has gone out.
	deadline := time.After(10 * time.Second)
	for syscall.Kill(-w.cmd.Process.Pid, 0) == nil {
		select {
		case <-deadline:
			out, _ := exec.Command("ps", "-eo", "pgid,pid,args").Output()
			var left []string
			for _, line := range strings.Split(string(out), "\n") {
				if f := strings.Fields(line); len(f) > 0 && f[0] == strconv.Itoa(w.cmd.Process.Pid) {
					left = append(left, line)
				}
			}
			t.Errorf("processes of worker.sh still run 10s after it stopped:\n%s", strings.Join(left, "\n"))
			_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// kill ends the worker and everything it started at once, as a crash.
func (w *worker) kill() {
	_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
	<-w.done
}

// run runs a plan with `planner run --nats-url url` and returns its exit
// code and execution result.
func run(t *testing.T, url, planJSON string, args ...string) (int, planbus.ExecutionResult) {
	t.Helper()
	r := runPlan(t.TempDir(), url, planJSON, args...)
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.code, r.res
}

type ran struct {
	code int
	res  planbus.ExecutionResult
	err  error
}

// runPlan is run for a goroutine of the test: it reports errors instead of
// failing the test.
func runPlan(dir, url, planJSON string, args ...string) ran {
	file := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(file, []byte(planJSON), 0o600); err != nil {
		return ran{err: err}
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var stdout, stderr bytes.Buffer
	args = append(append([]string{"run", "--nats-url", url}, args...), file)
	code := plannercmd.Run(ctx, args, cli.IO{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr,
		Env: func(string) string { return "" }})
	if ctx.Err() != nil {
		return ran{err: fmt.Errorf("planner run did not finish within %s; stderr:\n%s", wait, stderr.String())}
	}
	out := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var res planbus.ExecutionResult
	if err := json.Unmarshal([]byte(out[len(out)-1]), &res); err != nil {
		return ran{err: fmt.Errorf("planner run: last stdout line is not an execution result: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())}
	}
	return ran{code: code, res: res}
}

// runAsync runs a plan on a goroutine; the channel gets what came of it.
func runAsync(t *testing.T, url, planJSON string) <-chan ran {
	t.Helper()
	dir := t.TempDir()
	ch := make(chan ran, 1)
	go func() { ch <- runPlan(dir, url, planJSON) }()
	return ch
}

// finished waits for a plan run by runAsync.
func finished(t *testing.T, ch <-chan ran) (int, planbus.ExecutionResult) {
	t.Helper()
	r := await(t, "the end of planner run", ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.code, r.res
}

// settled waits until the consumer skill-upper holds no unacknowledged
// call: acks reach the consumer a moment after the worker sends them.
func settled(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for {
		cons, err := js.Consumer(ctx, "PLANBUS_TOOLS", "skill-upper")
		if err != nil {
			t.Fatal(err)
		}
		ci := cons.CachedInfo()
		if ci.NumAckPending == 0 && ci.NumPending == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("consumer skill-upper still holds %d unacknowledged and %d undelivered calls after %s", ci.NumAckPending, ci.NumPending, wait)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func tool(t *testing.T, res planbus.ExecutionResult, id string) planbus.ToolOutcome {
	t.Helper()
	for _, o := range res.Tools {
		if o.ToolID == id {
			return o
		}
	}
	t.Fatalf("plan %s has no tool %q: %+v", res.PlanID, id, res.Tools)
	return planbus.ToolOutcome{}
}

func connect(t *testing.T, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// started waits for the tool.started event of a request's tool.
func started(t *testing.T, nc *nats.Conn, requestID string) <-chan planbus.Event {
	t.Helper()
	ch := make(chan planbus.Event, 1)
	sub, err := nc.Subscribe("planbus.events."+requestID+".tool.started", func(m *nats.Msg) {
		var ev planbus.Event
		if json.Unmarshal(m.Data, &ev) == nil {
			select {
			case ch <- ev:
			default:
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return ch
}

func await[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatalf("no %s within %s", what, wait)
	}
	var zero T
	return zero
}

// The README's plan: upper, served by the shell script, feeds echo, served
// by planbus's own worker. Then failures, timeouts, heartbeats and cancels
// as docs/protocol.md specifies them.
func TestCLIWorker(t *testing.T) {
	path := tools(t)
	n := serve(t)
	// AckWait 3s (the script creates the consumer): heartbeats every second.
	w := startWorker(t, path, n.url, "PLANBUS_ACK_WAIT=3s")
	nc, js := connect(t, n.url)
	// Each subtest has its own deadline: on a loaded machine the whole
	// test can outlast one.
	subCtx := func(t *testing.T) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		t.Cleanup(cancel)
		return ctx
	}

	t.Run("serves the README's plan", func(t *testing.T) {
		ctx := subCtx(t)
		doc, err := os.ReadFile("plan.json")
		if err != nil {
			t.Fatal(err)
		}
		code, res := run(t, n.url, string(doc))
		if code != cli.ExitOK || !res.Success {
			t.Fatalf("exit %d, state %s, error %+v; want 0, succeeded\nworker:\n%s", code, res.State, res.Error, w.stderr.String())
		}
		shout := tool(t, res, "shout")
		if got, want := string(shout.Output), `{"text":"HELLO FROM A SHELL SCRIPT"}`; got != want {
			t.Errorf("shout's output %s, want %s", got, want)
		}
		if shout.WorkerID != "cli-test-worker" {
			t.Errorf("shout ran on %q, want the shell worker cli-test-worker", shout.WorkerID)
		}
		if got, want := string(tool(t, res, "show").Output), `{"upper":"HELLO FROM A SHELL SCRIPT"}`; got != want {
			t.Errorf("show's output %s, want %s", got, want)
		}

		// The result as stored: valid, with the token echoed and the
		// Nats-Msg-Id planbus derives from it.
		stream, err := js.Stream(ctx, "PLANBUS_RESULTS")
		if err != nil {
			t.Fatal(err)
		}
		msg, err := stream.GetMsg(ctx, shout.ResultSeq)
		if err != nil {
			t.Fatal(err)
		}
		if err := schemas.Validate(schemas.ToolResult, msg.Data); err != nil {
			t.Errorf("the stored result is not a valid tool result: %v\n%s", err, msg.Data)
		}
		var r planbus.ToolResult
		if err := json.Unmarshal(msg.Data, &r); err != nil {
			t.Fatal(err)
		}
		want := token.MsgID(planbus.IdempotencyKey(r.PlanID, r.ToolID, r.Attempt), r.Token)
		if got := msg.Header.Get(jetstream.MsgIDHeader); got != want {
			t.Errorf("the result's Nats-Msg-Id is %q, want %q", got, want)
		}
		// Published on planbus.results.<planId>, stored in the plan's
		// partition (docs/deploy.md, Partitions).
		if want := fmt.Sprintf("planbus.results.%d.%s", bus.PartitionOf(res.PlanID, bus.DefaultPartitions), res.PlanID); msg.Subject != want {
			t.Errorf("the result is stored on %s, want %s", msg.Subject, want)
		}
	})

	t.Run("reports the handler's error", func(t *testing.T) {
		code, res := run(t, n.url, `{"tools": [{"toolId": "bad", "skill": "upper", "input": {"txt": "no text"}}]}`)
		o := tool(t, res, "bad")
		if code != cli.ExitFailed || o.State != planbus.ToolFailed || o.Error == nil ||
			o.Error.Code != "INVALID_INPUT" || o.Error.Category != planbus.CategoryInvalidInput {
			t.Fatalf("exit %d, tool %s with error %+v; want 1, failed with INVALID_INPUT (invalid_input)", code, o.State, o.Error)
		}
		if o.Attempts != 1 {
			t.Errorf("%d attempts of an invalid input, want 1: invalid_input is not retried", o.Attempts)
		}
	})

	t.Run("stops a call at its timeout", func(t *testing.T) {
		code, res := run(t, n.url, `{"tools": [{"toolId": "slow", "skill": "upper", "timeoutMs": 1000,
			"retryPolicy": {"maxAttempts": 1}, "input": {"text": "x", "delayMs": 30000}}]}`)
		o := tool(t, res, "slow")
		if code != cli.ExitFailed || o.State != planbus.ToolTimeout || o.Error == nil ||
			o.Error.Code != planbus.CodeToolTimeout || o.Error.Category != planbus.CategoryTimeout {
			t.Fatalf("exit %d, tool %s with error %+v; want 1, timeout with TOOL_TIMEOUT (timeout)", code, o.State, o.Error)
		}
	})

	t.Run("heartbeats keep a call longer than AckWait", func(t *testing.T) {
		ctx := subCtx(t)
		id := "heartbeat-" + nuid.Next()
		events := started(t, nc, id)
		done := runAsync(t, n.url, `{"planId": "`+id+`", "tools": [{"toolId": "long", "skill": "upper",
			"input": {"text": "still here", "delayMs": 5000}}]}`)
		if ev := await(t, "tool.started event", events); ev.WorkerID != "cli-test-worker" {
			t.Fatalf("tool.started from %q, want cli-test-worker", ev.WorkerID)
		}
		// Another puller on the same consumer: had the call gone without a
		// heartbeat for AckWait (3s), JetStream would deliver it here.
		cons, err := js.Consumer(ctx, "PLANBUS_TOOLS", "skill-upper")
		if err != nil {
			t.Fatal(err)
		}
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(4*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			_ = m.Nak()
			t.Fatalf("the running call was delivered again (no heartbeats?): %s", m.Data())
		}
		_, res := finished(t, done)
		if o := tool(t, res, "long"); o.State != planbus.ToolSucceeded || o.Attempts != 1 || string(o.Output) != `{"text":"STILL HERE"}` {
			t.Fatalf("tool %s after %d attempts, output %s; want succeeded after 1 with STILL HERE", o.State, o.Attempts, o.Output)
		}
	})

	t.Run("ignores a forged cancel", func(t *testing.T) {
		id := "forged-" + nuid.Next()
		events := started(t, nc, id)
		done := runAsync(t, n.url, `{"planId": "`+id+`", "tools": [{"toolId": "t", "skill": "upper",
			"input": {"text": "on", "delayMs": 3000}}]}`)
		await(t, "tool.started event", events)
		// The worker subscribes to the plan's cancels as the call starts:
		// send forged ones until it says it has seen one.
		forged, _ := json.Marshal(planbus.Cancel{PlanID: id, Token: strings.Repeat("A", 43)})
		stop := make(chan struct{})
		go func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				_ = nc.Publish("planbus.cancel."+id, forged)
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		}()
		w.stderr.waitFor(t, "worker.sh", "plan "+id+" tool t attempt 1: ignoring a cancel")
		close(stop)
		// Had the worker obeyed one, the call would be dropped without a
		// result and the plan would wait for its timeout (60s).
		if _, res := finished(t, done); !res.Success {
			t.Fatalf("plan %s, error %+v; want succeeded: a cancel with the wrong token must change nothing\nworker:\n%s",
				res.State, res.Error, w.stderr.String())
		}
	})

	t.Run("stops a call its dispatcher cancels", func(t *testing.T) {
		ctx := subCtx(t)
		id := "cancelled-" + nuid.Next()
		events := started(t, nc, id)
		// The plan times out after 2s; its dispatcher then cancels the call
		// still running.
		done := runAsync(t, n.url, `{"planId": "`+id+`", "timeoutMs": 2000, "tools": [{"toolId": "t", "skill": "upper",
			"timeoutMs": 60000, "input": {"text": "never", "delayMs": 60000}}]}`)
		await(t, "tool.started event", events)
		_, res := finished(t, done)
		if o := tool(t, res, "t"); res.State != planbus.PlanTimeout || o.State != planbus.ToolCancelled {
			t.Fatalf("plan %s with tool %s, want timeout with the tool cancelled", res.State, o.State)
		}
		w.stderr.waitFor(t, "worker.sh", "plan "+id+" tool t attempt 1: cancelled; dropped the call")
		// Dropped: acknowledged, and no result published for it.
		settled(t, js)
		stream, err := js.Stream(ctx, "PLANBUS_RESULTS")
		if err != nil {
			t.Fatal(err)
		}
		if m, err := stream.GetLastMsgForSubject(ctx, "planbus.results."+id); !errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Errorf("a result for the cancelled call (%v): %s", err, m.Data)
		}
	})
}

// A worker killed -9 in the middle of a call: the next worker gets the
// call again after AckWait and, past PLANBUS_MAX_DELIVER deliveries,
// reports it failed with WORKER_CRASH instead of running it once more.
func TestCLIWorkerReportsACallThatKillsItsWorkers(t *testing.T) {
	path := tools(t)
	n := serve(t)
	env := []string{"PLANBUS_ACK_WAIT=3s", "PLANBUS_MAX_DELIVER=1"}
	first := startWorker(t, path, n.url, env...)
	nc, _ := connect(t, n.url)
	id := "crash-" + nuid.Next()
	events := started(t, nc, id)
	done := runAsync(t, n.url, `{"planId": "`+id+`", "tools": [{"toolId": "t", "skill": "upper",
		"timeoutMs": 60000, "retryPolicy": {"maxAttempts": 1}, "input": {"text": "x", "delayMs": 60000}}]}`)
	await(t, "tool.started event", events)
	first.kill()
	second := startWorker(t, path, n.url, env...)
	code, res := finished(t, done)
	o := tool(t, res, "t")
	if code != cli.ExitFailed || o.State != planbus.ToolFailed || o.Error == nil || o.Error.Code != planbus.CodeWorkerCrash {
		t.Fatalf("exit %d, tool %s with error %+v; want 1, failed with WORKER_CRASH\nsecond worker:\n%s",
			code, o.State, o.Error, second.stderr.String())
	}
}

// With authorization on, the script connects as the worker role (its
// seed, its inbox prefix) and everything it does is allowed: the plan runs
// and the call is acknowledged.
func TestCLIWorkerWithAuth(t *testing.T) {
	path := tools(t)
	n := serve(t, "--auth")
	auth := filepath.Join(n.dataDir, "auth")
	w := startWorker(t, path, n.url, "NATS_NKEY="+filepath.Join(auth, "worker.nk"))
	admin, err := nats.NkeyOptionFromSeed(filepath.Join(auth, "admin.nk"))
	if err != nil {
		t.Fatal(err)
	}
	nc, js := connect(t, n.url, admin, nats.CustomInboxPrefix("_INBOX_admin"))
	events := started(t, nc, "*")
	doc, err := os.ReadFile("plan.json")
	if err != nil {
		t.Fatal(err)
	}
	code, res := run(t, n.url, string(doc), "--nkey", filepath.Join(auth, "client.nk"))
	if code != cli.ExitOK || !res.Success {
		t.Fatalf("exit %d, state %s, error %+v; want 0, succeeded\nworker:\n%s", code, res.State, res.Error, w.stderr.String())
	}
	if got, want := string(tool(t, res, "shout").Output), `{"text":"HELLO FROM A SHELL SCRIPT"}`; got != want {
		t.Errorf("shout's output %s, want %s", got, want)
	}
	// Its tool.started event went out (the first one: shout's).
	if ev := await(t, "tool.started event", events); ev.WorkerID != "cli-test-worker" || ev.ToolID != "shout" {
		t.Errorf("first tool.started event from %q for %q, want cli-test-worker for shout", ev.WorkerID, ev.ToolID)
	}
	settled(t, js)
}
