package plannercmd

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/cli/toolworkercmd"
)

// served is a `planner serve` running in the test's process.
type served struct {
	url     string
	dataDir string
	stderr  *bustest.SyncBuffer
}

// startServe runs `planner serve` with args until the test ends, and
// returns once the node says it is up.
func startServe(t *testing.T, args ...string) served {
	t.Helper()
	dataDir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr bustest.SyncBuffer
	exited := make(chan int, 1)
	args = append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--log-format", "json", "--workers", "2"}, args...)
	go func() { exited <- Run(ctx, args, invocation{}.io(&stdout, &stderr)) }()
	t.Cleanup(func() {
		cancel()
		if code := <-exited; code != cli.ExitOK {
			t.Errorf("planner serve exited %d after its context ended; stderr:\n%s", code, stderr.String())
		}
	})
	deadline := time.After(wait)
	for {
		for _, line := range strings.Split(stderr.String(), "\n") {
			var rec struct {
				Message, URL string
			}
			if json.Unmarshal([]byte(line), &rec) == nil && strings.HasPrefix(rec.Message, "planbus node up") {
				return served{url: rec.URL, dataDir: dataDir, stderr: &stderr}
			}
		}
		select {
		case code := <-exited:
			t.Fatalf("planner serve exited %d; stderr:\n%s", code, stderr.String())
		case <-deadline:
			t.Fatalf("planner serve not up within %s; stderr:\n%s", wait, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// `planner serve --auth` writes a seed per role and says how to connect;
// a client with client.nk runs plans and requests and reads their status
// through `planner run` and `planner status`, a toolworker process joins
// with worker.nk, and nobody gets in without a seed.
func TestServeAuthAndRunAsAClient(t *testing.T) {
	s := startServe(t, "--auth")
	auth := filepath.Join(s.dataDir, "auth")
	clientSeed := filepath.Join(auth, "client.nk")
	for _, r := range bus.Roles() {
		if _, err := os.Stat(filepath.Join(auth, string(r)+".nk")); err != nil {
			t.Errorf("seed of %s: %v", r, err)
		}
	}
	if want := "nats --server " + s.url + " --nkey " + clientSeed; !strings.Contains(s.stderr.String(), want) {
		t.Errorf("serve's log does not say how to connect (%q):\n%s", want, s.stderr.String())
	}

	t.Run("plan as a client", func(t *testing.T) {
		o := runPlanner(t, "run", "--nats-url", s.url, "--nkey", clientSeed, "--quiet", example(t, "diamond.json"))
		if o.code != cli.ExitOK {
			t.Fatalf("exit %d, want 0; stderr:\n%s", o.code, o.stderr)
		}
		if res := o.result(t); !res.Success || !strings.HasSuffix(res.PlanID, "-1") {
			t.Errorf("result %s %s, want a success of the planner's plan <requestId>-1", res.PlanID, res.State)
		}
	})
	t.Run("request and status as a client", func(t *testing.T) {
		req := `{"kind": "plan", "requestId": "auth-req", "plan": {"tools": [{"toolId": "A", "skill": "echo", "input": {"n": 1}}]}}`
		o := invocation{stdin: req}.run(t, Run, "run", "--nats-url", s.url, "--nkey", clientSeed, "--quiet", "-")
		if o.code != cli.ExitOK {
			t.Fatalf("run: exit %d, want 0; stderr:\n%s", o.code, o.stderr)
		}
		o = runPlanner(t, "status", "--nats-url", s.url, "--nkey", clientSeed, "auth-req")
		if o.code != cli.ExitOK || !strings.Contains(o.stdout, "request auth-req") || !strings.Contains(o.stdout, "plan auth-req-1") {
			t.Errorf("status: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
		}
	})
	t.Run("a rejected plan names the problem", func(t *testing.T) {
		o := invocation{stdin: `{"tools":[{"toolId":"A","skill":"teleport"}]}`}.run(t, Run, "run", "--nats-url", s.url, "--nkey", clientSeed, "-")
		if o.code != cli.ExitUsage || !strings.Contains(o.stderr, `unknown skill "teleport"`) {
			t.Errorf("exit %d, stderr %q; want 2 naming the skill", o.code, o.stderr)
		}
	})
	t.Run("a worker process on its role", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var stdout, stderr bustest.SyncBuffer
		exited := make(chan int, 1)
		go func() {
			exited <- toolworkercmd.Run(ctx, []string{"--nats-url", s.url, "--nkey", filepath.Join(auth, "worker.nk"), "--skills", "echo",
				"--simulate", "outside(x)", "--log-level", "warn"}, invocation{}.io(&stdout, &stderr))
		}()
		defer func() {
			cancel()
			if code := <-exited; code != cli.ExitOK {
				t.Errorf("toolworker exited %d; stderr:\n%s", code, stderr.String())
			}
		}()
		// The skill exists once the worker has registered it; until then
		// the planner refuses the plan, so try until it takes it.
		plan := `{"tools":[{"toolId":"X","skill":"outside","input":{"x":1}}]}`
		deadline := time.Now().Add(wait)
		for {
			o := invocation{stdin: plan}.run(t, Run, "run", "--nats-url", s.url, "--nkey", clientSeed, "--quiet", "-")
			if o.code == cli.ExitOK {
				if res := o.result(t); res.Tools[0].WorkerID == "" {
					t.Errorf("no worker id in %+v", res.Tools[0])
				}
				break
			}
			if !strings.Contains(o.stderr, `unknown skill "outside"`) || time.Now().After(deadline) {
				t.Fatalf("exit %d; stderr:\n%s\ntoolworker:\n%s", o.code, o.stderr, stderr.String())
			}
			select {
			case code := <-exited:
				t.Fatalf("toolworker exited %d; stderr:\n%s", code, stderr.String())
			case <-time.After(20 * time.Millisecond):
			}
		}
		if strings.Contains(stderr.String(), "iolation") {
			t.Errorf("the worker needed more than its role allows:\n%s", stderr.String())
		}
	})
	t.Run("no seed, no entry", func(t *testing.T) {
		o := runPlanner(t, "run", "--nats-url", s.url, "--quiet", example(t, "diamond.json"))
		if o.code != cli.ExitFailed || !strings.Contains(strings.ToLower(o.stderr), "authorization") {
			t.Errorf("exit %d, stderr %q; want 1 and an authorization error", o.code, o.stderr)
		}
	})
	if strings.Contains(s.stderr.String(), "iolation") {
		t.Errorf("the node needed more than its roles allow:\n%s", s.stderr.String())
	}
}

// A client command given another role's seed (worker.nk, say) says so at
// once and exits 1, instead of waiting for what the server never lets it
// see and then naming a timeout.
func TestAnotherRolesSeedIsRefusedAtOnce(t *testing.T) {
	s := startServe(t, "--auth")
	worker := filepath.Join(s.dataDir, "auth", "worker.nk")
	for _, args := range [][]string{
		{"run", "--nats-url", s.url, "--nkey", worker, "--quiet", example(t, "diamond.json")},
		{"submit", "--nats-url", s.url, "--nkey", worker, example(t, "diamond.json")},
		{"status", "--nats-url", s.url, "--nkey", worker, "auth-req"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var stdout, stderr bustest.SyncBuffer
		code := Run(ctx, args, invocation{}.io(&stdout, &stderr))
		waited := ctx.Err() != nil
		cancel()
		if waited || code != cli.ExitFailed || !strings.Contains(stderr.String(), "is the seed given (--nkey) the client role's") {
			t.Errorf("%s with worker.nk: exit %d (waited 30 s: %v), stderr:\n%s\nwant exit 1 naming the seed", args[0], code, waited, stderr.String())
		}
	}
}

// A private run can be authenticated too.
func TestRunWithAuth(t *testing.T) {
	o := runPlanner(t, "run", "--auth", "--quiet", example(t, "diamond.json"))
	if o.code != cli.ExitOK {
		t.Fatalf("exit %d, want 0; stderr:\n%s", o.code, o.stderr)
	}
	if res := o.result(t); !res.Success {
		t.Errorf("result %s, want success", res.State)
	}
}

// Protected mode: an embedded server listening beyond loopback needs
// --auth or --insecure; the refusal comes before anything listens.
func TestProtectedMode(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"any address", nil, []string{"serve", "--listen", "0.0.0.0:4222"}},
		{"an interface's address", nil, []string{"serve", "--listen", "192.0.2.1:4222"}},
		{"IPv6 any", nil, []string{"serve", "--listen", "[::]:4222"}},
		{"a host name", nil, []string{"serve", "--listen", "planbus.example:4222"}},
		{"from the environment", map[string]string{"PLANBUS_LISTEN": "0.0.0.0:4222"}, []string{"serve"}},
		{"run", nil, []string{"run", "--listen", "0.0.0.0:0", example(t, "diamond.json")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := invocation{env: tt.env}.run(t, Run, tt.args...)
			if o.code != cli.ExitUsage || !strings.Contains(o.stderr, "--auth") || !strings.Contains(o.stderr, "--insecure") {
				t.Errorf("exit %d, stderr %q; want 2 naming --auth and --insecure", o.code, o.stderr)
			}
		})
	}
	t.Run("auth with an external server", func(t *testing.T) {
		o := runPlanner(t, "serve", "--auth", "--nats-url", "nats://127.0.0.1:1")
		if o.code != cli.ExitUsage || !strings.Contains(o.stderr, "--nkey") {
			t.Errorf("exit %d, stderr %q; want 2 pointing at --nkey", o.code, o.stderr)
		}
	})
}

// signalWriter is stderr that closes seen once it has been written what.
type signalWriter struct {
	bustest.SyncBuffer
	what string
	seen chan struct{}
	once sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	n, err := w.SyncBuffer.Write(p)
	if strings.Contains(w.SyncBuffer.String(), w.what) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

// An interrupted run against a running system says that its request goes
// on there, and how to follow or stop it.
func TestInterruptedRunSaysTheRequestGoesOn(t *testing.T) {
	s := startServe(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &signalWriter{what: "released", seen: make(chan struct{})}
	var stdout bustest.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"run", "--nats-url", s.url, example(t, "sleep-chain.json")},
			cli.IO{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: stderr, Env: func(string) string { return "" }})
	}()
	select {
	case <-stderr.seen:
	case <-time.After(time.Minute):
		t.Fatalf("no tool released within a minute:\n%s", stderr.String())
	}
	cancel() // as an interrupt does
	code := <-done
	want := " goes on running on " + s.url + ": follow it with 'planner watch --nats-url " + s.url + " "
	if code != cli.ExitSignal || !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), "'planner cancel --nats-url") {
		t.Fatalf("exit %d, stderr:\n%s\nwant %d and %q", code, stderr.String(), cli.ExitSignal, want)
	}
	// So does an interrupted watch of it.
	m := regexp.MustCompile(`request (\S+) goes on running`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no request id in:\n%s", stderr.String())
	}
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	wstderr := &signalWriter{what: "released", seen: make(chan struct{})}
	go func() {
		done <- Run(wctx, []string{"watch", "--nats-url", s.url, m[1]},
			cli.IO{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: wstderr, Env: func(string) string { return "" }})
	}()
	select {
	case <-wstderr.seen:
	case <-time.After(time.Minute):
		t.Fatalf("watch showed no progress within a minute:\n%s", wstderr.String())
	}
	wcancel()
	if code := <-done; code != cli.ExitSignal || !strings.Contains(wstderr.String(), "stopped watching; "+m[1]+" goes on running on "+s.url) {
		t.Errorf("watch: exit %d, stderr:\n%s", code, wstderr.String())
	}
}

// A planner that answers UNAVAILABLE (its store did not answer, as while a
// cluster elects a leader) has not refused the file: submit and run exit
// 1 and say to send it again, where a refusal of the input exits 2 naming
// the file.
func TestUnavailablePlannerIsNotABadFile(t *testing.T) {
	cfg := bustest.Start(t)
	conn := bustest.Dial(t, cfg)
	code := planbus.CodeUnavailable
	var mu sync.Mutex
	sub, err := conn.NC.Subscribe(bus.SubjectPlanRequest, func(m *nats.Msg) {
		mu.Lock()
		c := code
		mu.Unlock()
		rej, _ := json.Marshal(planbus.Rejected{Status: "rejected", Error: planbus.ReplyError{Code: c, Message: "context deadline exceeded"}})
		reply := nats.NewMsg(m.Reply)
		reply.Header.Set("Nats-Service-Error-Code", map[planbus.Code]string{planbus.CodeUnavailable: "503"}[c]+map[planbus.Code]string{planbus.CodeInvalidRequest: "400"}[c])
		reply.Header.Set("Nats-Service-Error", "context deadline exceeded")
		reply.Data = rej
		_ = m.RespondMsg(reply)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	// The server has the subscription before the commands ask (else: no
	// responders, seen once with the CPU busy).
	if err := conn.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(bustest.RepoRoot(t), "examples", "requests", "taxi.json")
	for _, verb := range []string{"submit", "run"} {
		o := runPlanner(t, verb, "--nats-url", cfg.URL, file)
		if o.code != cli.ExitFailed || !strings.Contains(o.stderr, "nothing was stored: send it again") || strings.Contains(o.stderr, file) {
			t.Errorf("%s, planner unavailable: exit %d, stderr:\n%s\nwant exit 1 saying to send it again, not naming the file", verb, o.code, o.stderr)
		}
	}
	mu.Lock()
	code = planbus.CodeInvalidRequest
	mu.Unlock()
	if o := runPlanner(t, "submit", "--nats-url", cfg.URL, file); o.code != cli.ExitUsage || !strings.Contains(o.stderr, file) {
		t.Errorf("submit, input refused: exit %d, stderr:\n%s\nwant exit 2 naming the file", o.code, o.stderr)
	}
}
