package cli

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
)

// buildCommands builds cmd/planner, cmd/dispatcher and cmd/toolworker.
func buildCommands(t *testing.T) map[string]string {
	t.Helper()
	return build(t, "./cmd/planner", "./cmd/dispatcher", "./cmd/toolworker")
}

// build builds the packages of main into a temporary directory and
// returns each binary's path by its name (the package's last element).
func build(t *testing.T, pkgs ...string) map[string]string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH, so the binaries cannot be built")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, append([]string{"build", "-o", dir + "/"}, pkgs...)...)
	cmd.Dir = bustest.RepoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	bins := map[string]string{}
	for _, p := range pkgs {
		bins[filepath.Base(p)] = filepath.Join(dir, filepath.Base(p))
	}
	return bins
}

// procs starts and kills the system's processes.
type procs struct {
	t    *testing.T
	bins map[string]string
	env  []string
	mu   sync.Mutex
	all  []*exec.Cmd
	done map[*exec.Cmd]chan struct{} // closed when the process has exited
	logs map[*exec.Cmd]*bustest.SyncBuffer
}

func (p *procs) start(name string, args ...string) *exec.Cmd {
	p.t.Helper()
	cmd := exec.Command(p.bins[name], args...)
	cmd.Env = p.env
	logs := &bustest.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	done := make(chan struct{})
	p.mu.Lock()
	if p.done == nil {
		p.done, p.logs = map[*exec.Cmd]chan struct{}{}, map[*exec.Cmd]*bustest.SyncBuffer{}
	}
	p.all = append(p.all, cmd)
	p.done[cmd], p.logs[cmd] = done, logs
	p.mu.Unlock()
	go func() { _ = cmd.Wait(); close(done) }()
	return cmd
}

// exited is closed when cmd has exited.
func (p *procs) exited(cmd *exec.Cmd) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done[cmd]
}

// output is what cmd has written to stdout and stderr so far.
func (p *procs) output(cmd *exec.Cmd) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs[cmd].String()
}

// grep is every line of every process's output (killed ones' too) that
// holds all of words, each line after the process's name and pid.
func (p *procs) grep(words ...string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	for _, c := range p.all {
		for line := range strings.Lines(p.logs[c].String()) {
			if !slices.ContainsFunc(words, func(w string) bool { return !strings.Contains(line, w) }) {
				fmt.Fprintf(&b, "%s[%d]: %s", filepath.Base(c.Path), c.Process.Pid, line)
			}
		}
	}
	return b.String()
}

// kill9 ends a process the hard way: no signal handler runs, nothing is
// drained or acknowledged.
// It returns once the process is gone. It may be called from any
// goroutine: a process that had already exited is not an error.
func (p *procs) kill9(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited(cmd)
}

func (p *procs) stopAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.all {
		_ = c.Process.Signal(syscall.SIGKILL)
	}
}

// TestKillNineOfAnyProcess runs the planner, a dispatcher and a tool
// worker as real processes and kills each with SIGKILL in the middle of a
// request: a replacement takes over, the request finishes, no tool is
// released twice, and only the call whose worker died runs twice.
func TestKillNineOfAnyProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills real processes; skipped with -short")
	}
	cfg := bustest.Start(t)
	p := &procs{t: t, bins: buildCommands(t), env: append(processEnv(t), "NATS_URL="+cfg.URL, "PLANBUS_LOG_LEVEL=warn")}
	t.Cleanup(p.stopAll)
	fast := []string{"--dispatcher-ack-wait", "1s"}
	workerArgs := []string{"--ack-wait", "1s", "--skills", "sleep"}
	dispatcher := p.start("dispatcher", fast...)
	worker := p.start("toolworker", workerArgs...)
	planner := p.start("planner", "serve", "--planner-ack-wait", "1s")

	var tools []string
	for i := range 8 {
		deps := "[]"
		if i > 0 {
			deps = fmt.Sprintf(`["s%d"]`, i-1)
		}
		tools = append(tools, fmt.Sprintf(`{"toolId":"s%d","skill":"sleep","dependencies":%s,"input":{"ms":400}}`, i, deps))
	}
	doc := `{"kind":"plan","plan":{"tools":[` + strings.Join(tools, ",") + `]}}`

	var mu sync.Mutex
	var trail []string
	released := map[string]int{}
	started := map[string]int{}
	kills := make(chan string, 16)
	onEvent := func(ev planbus.Event) {
		mu.Lock()
		defer mu.Unlock()
		trail = append(trail, fmt.Sprintf("%s %s %s a%d %s %s", ev.Time.Format("15:04:05.000"), ev.Type, ev.ToolID, ev.Attempt, ev.WorkerID, ev.Message))
		switch ev.Type {
		case planbus.EventToolReleased:
			released[ev.ToolID]++
		case planbus.EventToolStarted:
			started[ev.ToolID]++
			if started[ev.ToolID] == 1 {
				kills <- ev.ToolID
			}
		}
	}
	conn := bustest.Dial(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	go func() {
		for id := range kills {
			switch id {
			case "s1": // the dispatcher dies while s1 runs
				p.kill9(dispatcher)
				dispatcher = p.start("dispatcher", fast...)
			case "s3": // the worker dies running s3
				p.kill9(worker)
				worker = p.start("toolworker", workerArgs...)
			case "s5": // the planner dies with the request under way
				p.kill9(planner)
				planner = p.start("planner", "serve", "--planner-ack-wait", "1s")
			}
		}
	}()
	// Wait until the planner answers and the worker has advertised its
	// skill (the planner refuses plans with skills nobody serves).
	skills, err := conn.JS.KeyValue(ctx, bus.BucketSkills)
	if err != nil {
		t.Fatal(err)
	}
	advertised, err := skills.Watch(ctx, "sleep")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = advertised.Stop() }()
	for e := range advertised.Updates() {
		if e != nil {
			break
		}
	}
	for {
		if _, err := conn.NC.Request("$SRV.PING.planbus-planner", nil, time.Second); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the planner process never answered")
		}
	}
	if ctx.Err() != nil {
		t.Fatal("the worker never advertised the sleep skill")
	}
	out, err := newClient(t, conn).Run(ctx, []byte(doc), onEvent)
	close(kills)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Success || out.Attempts != 1 {
		t.Fatalf("outcome %s after %d attempts: %+v", out.Status, out.Attempts, out.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range 8 {
		id := fmt.Sprintf("s%d", i)
		if released[id] != 1 {
			t.Errorf("%s released %d times, want once", id, released[id])
		}
		want := 1
		if id == "s3" {
			want = 2 // its worker died in the middle: run again by the new one
		}
		if started[id] != want {
			t.Errorf("%s started %d times, want %d\n%s", id, started[id], want, strings.Join(trail, "\n"))
		}
		if a := out.Execution.Tools[i].Attempts; a != 1 {
			t.Errorf("%s: %d attempts, want 1 (a redelivery is not a retry)", id, a)
		}
	}
}
