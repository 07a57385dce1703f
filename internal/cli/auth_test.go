package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
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
)

// served is a `planner serve` running in the test's process.
type served struct {
	url     string
	dataDir string
	stderr  *syncBuffer
}

// startServe runs `planner serve` with args until the test ends, and
// returns once the node says it is up.
func startServe(t *testing.T, args ...string) served {
	t.Helper()
	dataDir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	exited := make(chan int, 1)
	args = append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--log-format", "json", "--workers", "2"}, args...)
	go func() { exited <- Planner(ctx, args, invocation{}.io(&stdout, &stderr)) }()
	t.Cleanup(func() {
		cancel()
		if code := <-exited; code != ExitOK {
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
		if o.code != ExitOK {
			t.Fatalf("exit %d, want 0; stderr:\n%s", o.code, o.stderr)
		}
		if res := o.result(t); !res.Success || !strings.HasSuffix(res.PlanID, "-1") {
			t.Errorf("result %s %s, want a success of the planner's plan <requestId>-1", res.PlanID, res.State)
		}
	})
	t.Run("request and status as a client", func(t *testing.T) {
		req := `{"kind": "plan", "requestId": "auth-req", "plan": {"tools": [{"toolId": "A", "skill": "echo", "input": {"n": 1}}]}}`
		o := invocation{stdin: req}.run(t, Planner, "run", "--nats-url", s.url, "--nkey", clientSeed, "--quiet", "-")
		if o.code != ExitOK {
			t.Fatalf("run: exit %d, want 0; stderr:\n%s", o.code, o.stderr)
		}
		o = runPlanner(t, "status", "--nats-url", s.url, "--nkey", clientSeed, "auth-req")
		if o.code != ExitOK || !strings.Contains(o.stdout, "request auth-req") || !strings.Contains(o.stdout, "plan auth-req-1") {
			t.Errorf("status: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
		}
	})
	t.Run("a rejected plan names the problem", func(t *testing.T) {
		o := invocation{stdin: `{"tools":[{"toolId":"A","skill":"teleport"}]}`}.run(t, Planner, "run", "--nats-url", s.url, "--nkey", clientSeed, "-")
		if o.code != ExitUsage || !strings.Contains(o.stderr, `unknown skill "teleport"`) {
			t.Errorf("exit %d, stderr %q; want 2 naming the skill", o.code, o.stderr)
		}
	})
	t.Run("a worker process on its role", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var stdout, stderr syncBuffer
		exited := make(chan int, 1)
		go func() {
			exited <- Toolworker(ctx, []string{"--nats-url", s.url, "--nkey", filepath.Join(auth, "worker.nk"), "--skills", "echo",
				"--simulate", "outside(x)", "--log-level", "warn"}, invocation{}.io(&stdout, &stderr))
		}()
		defer func() {
			cancel()
			if code := <-exited; code != ExitOK {
				t.Errorf("toolworker exited %d; stderr:\n%s", code, stderr.String())
			}
		}()
		// The skill exists once the worker has registered it; until then
		// the planner refuses the plan, so try until it takes it.
		plan := `{"tools":[{"toolId":"X","skill":"outside","input":{"x":1}}]}`
		deadline := time.Now().Add(wait)
		for {
			o := invocation{stdin: plan}.run(t, Planner, "run", "--nats-url", s.url, "--nkey", clientSeed, "--quiet", "-")
			if o.code == ExitOK {
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
		if o.code != ExitFailed || !strings.Contains(strings.ToLower(o.stderr), "authorization") {
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
		var stdout, stderr syncBuffer
		code := Planner(ctx, args, invocation{}.io(&stdout, &stderr))
		waited := ctx.Err() != nil
		cancel()
		if waited || code != ExitFailed || !strings.Contains(stderr.String(), "is the seed given (--nkey) the client role's") {
			t.Errorf("%s with worker.nk: exit %d (waited 30 s: %v), stderr:\n%s\nwant exit 1 naming the seed", args[0], code, waited, stderr.String())
		}
	}
}

// A private run can be authenticated too.
func TestRunWithAuth(t *testing.T) {
	o := runPlanner(t, "run", "--auth", "--quiet", example(t, "diamond.json"))
	if o.code != ExitOK {
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
			o := invocation{env: tt.env}.run(t, Planner, tt.args...)
			if o.code != ExitUsage || !strings.Contains(o.stderr, "--auth") || !strings.Contains(o.stderr, "--insecure") {
				t.Errorf("exit %d, stderr %q; want 2 naming --auth and --insecure", o.code, o.stderr)
			}
		})
	}
	t.Run("auth with an external server", func(t *testing.T) {
		o := runPlanner(t, "serve", "--auth", "--nats-url", "nats://127.0.0.1:1")
		if o.code != ExitUsage || !strings.Contains(o.stderr, "--nkey") {
			t.Errorf("exit %d, stderr %q; want 2 pointing at --nkey", o.code, o.stderr)
		}
	})
}

// What protected mode lets through, without opening a port beyond loopback.
func TestExposureAllowed(t *testing.T) {
	for _, c := range []common{
		{bus: bus.Config{Listen: "127.0.0.1:4222"}},
		{bus: bus.Config{Listen: "127.8.0.1:4222"}},
		{bus: bus.Config{Listen: "localhost:4222"}},
		{bus: bus.Config{Listen: "[::1]:4222"}},
		{},
		{bus: bus.Config{Listen: "0.0.0.0:4222"}, auth: true},
		{bus: bus.Config{Listen: "0.0.0.0:4222"}, insecure: true},
		{bus: bus.Config{URL: "nats://10.0.0.1:4222", Listen: "0.0.0.0:4222"}},
	} {
		if err := c.checkExposure("planner serve"); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

func TestAuthInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	o := runPlanner(t, "auth", "init", dir)
	if o.code != ExitOK || strings.Count(o.stdout, "created") != len(bus.Roles()) {
		t.Fatalf("exit %d, stdout %q, stderr %q; want every seed created", o.code, o.stdout, o.stderr)
	}
	seeds := map[bus.Role][]byte{}
	for _, r := range bus.Roles() {
		path := filepath.Join(dir, string(r)+".nk")
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v", path, err, st.Mode().Perm())
		}
		seeds[r], _ = os.ReadFile(path)
	}
	conf, s := written(t, dir)
	for _, r := range bus.Roles() {
		if !strings.Contains(string(conf), s.PublicKey(r)) {
			t.Errorf("auth.conf lacks %s's key", r)
		}
		if bytes.Contains(conf, bytes.TrimSpace(seeds[r])) {
			t.Errorf("auth.conf holds %s's seed", r)
		}
	}

	other := filepath.Join(t.TempDir(), "nats-auth.conf")
	o = runPlanner(t, "auth", "init", "--nats-conf", other, dir)
	if o.code != ExitOK || strings.Count(o.stdout, "kept") != len(bus.Roles()) {
		t.Fatalf("again: exit %d, stdout %q; want every seed kept", o.code, o.stdout)
	}
	for _, r := range bus.Roles() {
		if now, _ := os.ReadFile(filepath.Join(dir, string(r)+".nk")); !bytes.Equal(now, seeds[r]) {
			t.Errorf("%s: the seed changed", r)
		}
	}
	if again, _ := os.ReadFile(other); !bytes.Equal(again, conf) {
		t.Error("the same seeds gave another configuration")
	}

	for _, args := range [][]string{{"auth"}, {"auth", "rotate"}, {"auth", "init"}, {"auth", "init", "a", "b"}} {
		if o := runPlanner(t, args...); o.code != ExitUsage {
			t.Errorf("%v: exit %d, want 2", args, o.code)
		}
	}
}

// --listen is the user's: protected mode never panics on it, and lets
// through only loopback addresses (or says why not).
func FuzzCheckExposure(f *testing.F) {
	for _, s := range []string{"127.0.0.1:4222", "0.0.0.0:4222", "[::1]:1", "[::]:1", "localhost:0", "LOCALHOST:1", "host:1", ":4222", "nohost", "[fe80::1%eth0]:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, listen string) {
		c := common{bus: bus.Config{Listen: listen}}
		err := c.checkExposure("planner serve")
		host, _, splitErr := net.SplitHostPort(c.bus.Defaults().Listen)
		if err == nil && splitErr == nil && !loopback(host) {
			t.Fatalf("--listen %q let through", listen)
		}
		if err != nil && !strings.Contains(err.Error(), "--auth") {
			t.Fatalf("refusal %q does not name --auth", err)
		}
	})
}

// written reads what auth init wrote to dir: the configuration and the
// seeds.
func written(t *testing.T, dir string) ([]byte, *bus.Seeds) {
	t.Helper()
	conf, err := os.ReadFile(filepath.Join(dir, "auth.conf"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := bus.EnsureSeeds(dir)
	if err != nil {
		t.Fatal(err)
	}
	return conf, s
}

// --worker adds worker groups: a seed each, their skills kept beside it
// (so a later run without --worker keeps them), and a user each in the
// configuration with the worker's grants for those skills alone.
func TestAuthInitWorkerGroups(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	o := runPlanner(t, "auth", "init", "--worker", "web=http,echo", "--worker", "shell=shell", dir)
	if o.code != ExitOK || !strings.Contains(o.stdout, "worker-web.nk  created") || !strings.Contains(o.stdout, "skills http, echo") {
		t.Fatalf("exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	seed, err := os.ReadFile(filepath.Join(dir, "worker-web.nk"))
	if st, _ := os.Stat(filepath.Join(dir, "worker-web.nk")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("worker-web.nk: %v", err)
	}
	if skills, _ := os.ReadFile(filepath.Join(dir, "worker-web.skills")); string(skills) != "http\necho\n" {
		t.Errorf("worker-web.skills = %q", skills)
	}
	conf, s := written(t, dir)
	if g := s.Groups(); len(g) != 2 || g[0].Name != "shell" || g[1].Name != "web" {
		t.Fatalf("groups %+v", g)
	}
	web := s.Groups()[1]
	for _, want := range []string{"# worker group web: skills http, echo", web.PublicKey, `"$KV.planbus-skills.http"`,
		`"$JS.API.CONSUMER.MSG.NEXT.PLANBUS_TOOLS.skill-echo"`, `"planbus.invoke.shell"`} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("auth.conf lacks %s", want)
		}
	}
	if bytes.Contains(conf, bytes.TrimSpace(seed)) {
		t.Error("auth.conf holds a group's seed")
	}

	// Again without --worker: the groups stay, with their seeds.
	o = runPlanner(t, "auth", "init", dir)
	if o.code != ExitOK || !strings.Contains(o.stdout, "worker-web.nk  kept") {
		t.Fatalf("again: exit %d, stdout %q", o.code, o.stdout)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "auth.conf")); !bytes.Equal(again, conf) {
		t.Error("the same seeds and groups gave another configuration")
	}
	// Given again, a group's skills are replaced and its seed kept.
	o = runPlanner(t, "auth", "init", "--worker", "web=echo", dir)
	if now, _ := os.ReadFile(filepath.Join(dir, "worker-web.nk")); o.code != ExitOK || !bytes.Equal(now, seed) {
		t.Fatalf("exit %d, seed changed %v", o.code, !bytes.Equal(now, seed))
	}
	if skills, _ := os.ReadFile(filepath.Join(dir, "worker-web.skills")); string(skills) != "echo\n" {
		t.Errorf("worker-web.skills = %q after --worker web=echo", skills)
	}

	for _, tt := range []struct {
		arg, want string
		code      int
	}{
		{"web", "want NAME=SKILL", ExitUsage},
		{"=echo", "want NAME=SKILL", ExitUsage},
		{"a b=echo", `worker group "a b"`, ExitUsage},
		{"web=echo,no/slash", `skill "no/slash"`, ExitUsage},
		{"web=,", `skill ""`, ExitUsage},
	} {
		bad := filepath.Join(t.TempDir(), "auth")
		o := runPlanner(t, "auth", "init", "--worker", "fine=echo", "--worker", tt.arg, bad)
		if o.code != tt.code || !strings.Contains(o.stderr, tt.want) {
			t.Errorf("--worker %q: exit %d, stderr %q; want %d naming %s", tt.arg, o.code, o.stderr, tt.code, tt.want)
		}
		if _, err := os.Stat(bad); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("--worker %q: %s was written (%v); a refused run writes nothing", tt.arg, bad, err)
		}
	}
}

// signalWriter is stderr that closes seen once it has been written what.
type signalWriter struct {
	syncBuffer
	what string
	seen chan struct{}
	once sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	n, err := w.syncBuffer.Write(p)
	if strings.Contains(w.syncBuffer.String(), w.what) {
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
	var stdout syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Planner(ctx, []string{"run", "--nats-url", s.url, example(t, "sleep-chain.json")},
			IO{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: stderr, Env: func(string) string { return "" }})
	}()
	select {
	case <-stderr.seen:
	case <-time.After(time.Minute):
		t.Fatalf("no tool released within a minute:\n%s", stderr.String())
	}
	cancel() // as an interrupt does
	code := <-done
	want := " goes on running on " + s.url + ": follow it with 'planner watch --nats-url " + s.url + " "
	if code != exitSignal || !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), "'planner cancel --nats-url") {
		t.Fatalf("exit %d, stderr:\n%s\nwant %d and %q", code, stderr.String(), exitSignal, want)
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
		done <- Planner(wctx, []string{"watch", "--nats-url", s.url, m[1]},
			IO{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: wstderr, Env: func(string) string { return "" }})
	}()
	select {
	case <-wstderr.seen:
	case <-time.After(time.Minute):
		t.Fatalf("watch showed no progress within a minute:\n%s", wstderr.String())
	}
	wcancel()
	if code := <-done; code != exitSignal || !strings.Contains(wstderr.String(), "stopped watching; "+m[1]+" goes on running on "+s.url) {
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
		reply.Header.Set("Nats-Service-Error-Code", map[string]string{planbus.CodeUnavailable: "503"}[c]+map[string]string{planbus.CodeInvalidRequest: "400"}[c])
		reply.Header.Set("Nats-Service-Error", "context deadline exceeded")
		reply.Data = rej
		_ = m.RespondMsg(reply)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	file := filepath.Join(repoRoot(t), "examples", "requests", "taxi.json")
	for _, verb := range []string{"submit", "run"} {
		o := runPlanner(t, verb, "--nats-url", cfg.URL, file)
		if o.code != ExitFailed || !strings.Contains(o.stderr, "nothing was stored: send it again") || strings.Contains(o.stderr, file) {
			t.Errorf("%s, planner unavailable: exit %d, stderr:\n%s\nwant exit 1 saying to send it again, not naming the file", verb, o.code, o.stderr)
		}
	}
	mu.Lock()
	code = planbus.CodeInvalidRequest
	mu.Unlock()
	if o := runPlanner(t, "submit", "--nats-url", cfg.URL, file); o.code != ExitUsage || !strings.Contains(o.stderr, file) {
		t.Errorf("submit, input refused: exit %d, stderr:\n%s\nwant exit 2 naming the file", o.code, o.stderr)
	}
}

// planner auth add-client writes a client's seed and its user, with its
// own endpoints and inbox, to auth.conf; again, it keeps the seed.
func TestAuthAddClient(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	o := runPlanner(t, "auth", "add-client", "--dir", dir, "alice")
	if o.code != ExitOK || !strings.Contains(o.stdout, "client-alice.nk  created") || !strings.Contains(o.stdout, "restart 'planner serve --auth'") {
		t.Fatalf("exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	seed, err := os.ReadFile(filepath.Join(dir, "client-alice.nk"))
	if st, _ := os.Stat(filepath.Join(dir, "client-alice.nk")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("client-alice.nk: %v", err)
	}
	conf, s := written(t, dir)
	if c := s.Clients(); len(c) != 1 || c[0].Name != "alice" {
		t.Fatalf("clients %+v", c)
	}
	for _, want := range []string{"# client alice", s.Clients()[0].PublicKey, `"planbus.client.alice.>"`, `"_INBOX_client_alice.>"`} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("auth.conf lacks %s", want)
		}
	}
	if bytes.Contains(conf, bytes.TrimSpace(seed)) {
		t.Error("auth.conf holds a client's seed")
	}
	o = runPlanner(t, "auth", "add-client", "--dir", dir, "alice")
	if now, _ := os.ReadFile(filepath.Join(dir, "client-alice.nk")); o.code != ExitOK || !bytes.Equal(now, seed) || !strings.Contains(o.stdout, "kept") {
		t.Fatalf("again: exit %d, seed changed %v, stdout %q", o.code, !bytes.Equal(now, seed), o.stdout)
	}
	for _, bad := range [][]string{{"--dir", dir}, {"--dir", dir, "a b"}, {"--dir", dir, "a.b"}} {
		if o := runPlanner(t, append([]string{"auth", "add-client"}, bad...)...); o.code != ExitUsage {
			t.Errorf("add-client %q: exit %d (%s), want %d", bad, o.code, o.stderr, ExitUsage)
		}
	}
}
