package plannercmd

import (
	"context"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/cli/dispatchercmd"
	"github.com/planbus/planbus/internal/cli/toolworkercmd"
)

func TestRunDiamond(t *testing.T) {
	o := runPlanner(t, "run", example(t, "diamond.json"))
	if o.code != cli.ExitOK {
		t.Fatalf("exit %d, want 0; stderr:\n%s", o.code, o.stderr)
	}
	res := o.result(t)
	if !res.Success || res.State != planbus.PlanSucceeded || len(res.Tools) != 4 {
		t.Fatalf("result %s success %v with %d tools, want 4 tools succeeded", res.State, res.Success, len(res.Tools))
	}
	if got, want := string(toolOutcome(res, "D").Output), `{"city":"Lisbon","slept":[200,200]}`; got != want {
		t.Errorf("D output %s, want %s (its references resolved)", got, want)
	}
	for _, want := range []string{"plan " + res.PlanID + " started", "plan succeeded in"} {
		if !strings.Contains(o.stderr, want) {
			t.Errorf("no progress line %q on stderr:\n%s", want, o.stderr)
		}
	}
}

func TestRunFailingPlanExits1(t *testing.T) {
	o := runPlanner(t, "run", "--quiet", example(t, "required-failure.json"))
	if o.code != cli.ExitFailed {
		t.Fatalf("exit %d, want 1; stderr:\n%s", o.code, o.stderr)
	}
	res := o.result(t)
	if res.Success || res.State != planbus.PlanFailed || !res.CanReplan || !slices.Contains(res.FailedTools, "B") {
		t.Errorf("result %s success %v canReplan %v failed tools %v, want failed because of B",
			res.State, res.Success, res.CanReplan, res.FailedTools)
	}
	if want := "planner run: plan " + res.PlanID + " failed"; !strings.Contains(o.stderr, want) {
		t.Errorf("stderr %q, want it to say %q", o.stderr, want)
	}
}

func TestRunReadsStdin(t *testing.T) {
	o := invocation{stdin: `{"tools":[{"toolId":"hello","skill":"echo","input":{"greeting":"hi"}}]}`}.
		run(t, Run, "run", "--quiet", "--workers", "1", "-")
	if o.code != cli.ExitOK {
		t.Fatalf("exit %d, want 0; stderr:\n%s", o.code, o.stderr)
	}
	if got := string(toolOutcome(o.result(t), "hello").Output); got != `{"greeting":"hi"}` {
		t.Errorf("output %s, want the input from stdin echoed", got)
	}
	if o.stderr != "" {
		t.Errorf("stderr with --quiet: %q, want nothing", o.stderr)
	}
}

// A document that is not a valid plan is a usage error, found before
// anything is started: here nothing reaches the server NATS_URL names.
func TestRunRejectsInvalidPlansBeforeStarting(t *testing.T) {
	cfg := bustest.Start(t)
	conn := bustest.Dial(t, cfg)
	tests := []struct {
		name, file, stdin, want string
	}{
		{"cycle", example(t, "cycle.json"), "", "cycle: B -> C -> B"},
		{"unknown dependency", "-", `{"tools":[{"toolId":"D","skill":"echo","dependencies":["X"]}]}`,
			`tool "D" depends on unknown tool "X"`},
		{"schema violation", "-", `{"tools":[{"toolId":"A","skill":"echo","timeoutMs":-5}]}`, "at /tools/0/timeoutMs"},
		{"no tools", "-", `{"tools":[]}`, "at /tools: the plan has no tools"},
		{"not JSON", "-", `{"tools":[`, "planner run: -: "},
		{"no such file", example(t, "no-such-plan.json"), "", "no-such-plan.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := invocation{env: map[string]string{"NATS_URL": cfg.URL}, stdin: tt.stdin}.run(t, Run, "run", tt.file)
			if o.code != cli.ExitUsage {
				t.Errorf("exit %d, want 2; stderr:\n%s", o.code, o.stderr)
			}
			if !strings.Contains(o.stderr, tt.want) {
				t.Errorf("stderr %q, want it to name the problem: %q", o.stderr, tt.want)
			}
			if o.stdout != "" {
				t.Errorf("stdout %q, want nothing", o.stdout)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s, err := conn.JS.Stream(ctx, bus.StreamPlans)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 {
		t.Errorf("%d plans were submitted, want none", info.State.Msgs)
	}
}

func TestPlannerUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want string // on stdout or stderr
	}{
		{"no command", nil, cli.ExitUsage, "Usage: planner <command>"},
		{"unknown command", []string{"launch"}, cli.ExitUsage, `planner: unknown command "launch"`},
		{"help", []string{"help"}, cli.ExitOK, "Usage: planner <command>"},
		{"version", []string{"version"}, cli.ExitOK, "planbus "},
		{"run without a file", []string{"run"}, cli.ExitUsage, "want exactly one FILE"},
		{"run with two files", []string{"run", "a.json", "b.json"}, cli.ExitUsage, "want exactly one FILE"},
		{"run with a flag after the file", []string{"run", "a.json", "--nats-url", "nats://127.0.0.1:4222"}, cli.ExitUsage,
			"want exactly one FILE (or - for stdin) (flags go before the arguments: --nats-url came after them)"},
		{"status with a flag after the id", []string{"status", "r1", "--nats-url", "nats://127.0.0.1:4222"}, cli.ExitUsage,
			"(flags go before the arguments: --nats-url came after them)"},
		{"unknown flag", []string{"run", "--frobnicate", "a.json"}, cli.ExitUsage, "flag provided but not defined: -frobnicate"},
		{"a stream setting on a client verb", []string{"submit", "--retention", "1h", "a.json"}, cli.ExitUsage, "flag provided but not defined: -retention"},
		{"bad log level", []string{"run", "--log-level", "loud", "a.json"}, cli.ExitUsage, `--log-level "loud"`},
		{"run help", []string{"run", "-h"}, cli.ExitOK, "Usage: planner run [flags] FILE"},
		{"not a size", []string{"run", "--htn-max-memory", "lots", "a.json"}, cli.ExitUsage, `"lots" is not a size like 256MiB`},
		{"generation over the node budget", []string{"run", "--htn-max-memory", "512MiB", "a.json"}, cli.ExitUsage,
			"--gen-max-memory 268435456: want at least --htn-max-memory (536870912)"},
		{"tiny htn budget", []string{"run", "--htn-max-memory", "1KiB", "a.json"}, cli.ExitUsage, "--htn-max-memory 1024: want at least 1MiB"},
		{"negative concurrency", []string{"run", "--gen-concurrency", "-1", "a.json"}, cli.ExitUsage, "--gen-concurrency -1"},
		{"domains not a directory", []string{"run", "--domains", "/nonexistent-domains", "a.json"}, cli.ExitUsage, `planner run: --domains "/nonexistent-domains": not a directory`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := runPlanner(t, tt.args...)
			if o.code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", o.code, tt.code, o.stderr)
			}
			if out := o.stdout + o.stderr; !strings.Contains(out, tt.want) {
				t.Errorf("output %q, want it to contain %q", out, tt.want)
			}
		})
	}
	// Help shows the defaults each command really uses.
	helps := []struct {
		args          []string
		want, notWant []string
	}{
		{[]string{"run", "-h"}, []string{`(default "127.0.0.1:0")`, "a new temporary directory", `(default "warn")`}, []string{`"127.0.0.1:4222"`}},
		{[]string{"serve", "-h"}, []string{`(default "127.0.0.1:4222")`, `(default "info")`}, nil},
		{[]string{"status", "-h"}, []string{"comma-separated (required)"}, []string{"starts an embedded server", "-listen"}},
		// Client verbs declare no stream, so the streams' settings are
		// not theirs to take; the commands that declare them take them.
		{[]string{"submit", "-h"}, []string{"-connect-timeout"}, []string{"-retention", "-partitions", "-replicas", "-keep-events", "-sync"}},
		{[]string{"serve", "-h"}, []string{"-retention", "-partitions", "-replicas", "-keep-events"}, nil},
	}
	for _, h := range helps {
		o := runPlanner(t, h.args...)
		for _, w := range h.want {
			if !strings.Contains(o.stderr, w) {
				t.Errorf("planner %v: help does not say %q:\n%s", h.args, w, o.stderr)
			}
		}
		for _, w := range h.notWant {
			if strings.Contains(o.stderr, w) {
				t.Errorf("planner %v: help says %q, which is not what it does:\n%s", h.args, w, o.stderr)
			}
		}
	}
	if o := runPlanner(t, "launch"); !strings.Contains(o.stderr, "Usage: planner <command>") || o.stdout != "" {
		t.Errorf("an unknown command: stdout %q, stderr %q; want the usage on stderr", o.stdout, o.stderr)
	}
}

func TestBadEnvironmentIsAUsageErrorNamingTheVariable(t *testing.T) {
	tests := []struct{ name, value, want string }{
		{"PLANBUS_WORKERS", "abc", `$PLANBUS_WORKERS="abc" is not a number`},
		{"PLANBUS_ACK_WAIT", "soon", `$PLANBUS_ACK_WAIT="soon" is not a duration`},
		{"PLANBUS_LOG_LEVEL", "loud", `--log-level "loud"`},
		{"PLANBUS_HTN_MAX_MEMORY", "big", `$PLANBUS_HTN_MAX_MEMORY="big": "big" is not a size`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := invocation{env: map[string]string{tt.name: tt.value}}.run(t, Run, "run", example(t, "diamond.json"))
			if o.code != cli.ExitUsage || !strings.Contains(o.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", o.code, o.stderr, tt.want)
			}
			if o.stdout != "" {
				t.Errorf("stdout %q, want nothing", o.stdout)
			}
		})
	}
}

// fourAtOnce is a plan of four calls that can all run at once.
const fourAtOnce = `{"maxConcurrency":4,"tools":[
	{"toolId":"a","skill":"sleep","input":{"ms":200}},{"toolId":"b","skill":"sleep","input":{"ms":200}},
	{"toolId":"c","skill":"sleep","input":{"ms":200}},{"toolId":"d","skill":"sleep","input":{"ms":200}}]}`

func TestEnvironmentSetsFlags(t *testing.T) {
	t.Run("PLANBUS_WORKERS", func(t *testing.T) {
		// With one call at a time per worker, four calls at once would
		// use four of the default four workers; two workers take turns.
		o := invocation{env: map[string]string{"PLANBUS_WORKERS": "2"}, stdin: fourAtOnce}.
			run(t, Run, "run", "--quiet", "--concurrency", "1", "-")
		if o.code != cli.ExitOK {
			t.Fatalf("exit %d; stderr:\n%s", o.code, o.stderr)
		}
		var workers []string
		for _, tool := range o.result(t).Tools {
			if !slices.Contains(workers, tool.WorkerID) {
				workers = append(workers, tool.WorkerID)
			}
		}
		slices.Sort(workers)
		if !slices.Equal(workers, []string{"worker-1", "worker-2"}) {
			t.Errorf("calls ran on %v, want worker-1 and worker-2", workers)
		}
	})
	t.Run("PLANBUS_SKILLS", func(t *testing.T) {
		o := invocation{env: map[string]string{"PLANBUS_SKILLS": "echo", "PLANBUS_WORKERS": "1"}}.
			run(t, Run, "run", "--quiet", example(t, "diamond.json"))
		if o.code != cli.ExitFailed {
			t.Fatalf("exit %d, want 1: the workers serve no sleep skill; stderr:\n%s", o.code, o.stderr)
		}
		if res := o.result(t); res.State != planbus.PlanRejected || !strings.Contains(res.Error.Message, `unknown skill "sleep"`) {
			t.Errorf("result %s %+v, want rejected for the unknown skill sleep", res.State, res.Error)
		}
	})
	t.Run("a flag wins over its variable", func(t *testing.T) {
		o := invocation{env: map[string]string{"PLANBUS_SKILLS": "echo", "PLANBUS_WORKERS": "1"}}.
			run(t, Run, "run", "--quiet", "--skills", "echo,sleep", example(t, "diamond.json"))
		if o.code != cli.ExitOK {
			t.Fatalf("exit %d, want 0; stderr:\n%s", o.code, o.stderr)
		}
	})
}

// Flags that cannot make a node are usage errors, as `planner serve` and
// `toolworker` treat them.
func TestRunWithBadNodeFlagsIsAUsageError(t *testing.T) {
	for _, args := range [][]string{{"--skills", "teleport"}, {"--workers", "-1"}, {"--keep-events", "none"}} {
		o := runPlanner(t, append(append([]string{"run"}, args...), example(t, "diamond.json"))...)
		if o.code != cli.ExitUsage {
			t.Errorf("%v: exit %d, want 2; stderr:\n%s", args, o.code, o.stderr)
		}
	}
}

func TestDaemonsRequireANATSURL(t *testing.T) {
	commands := map[string]func(context.Context, []string, cli.IO) int{"dispatcher": dispatchercmd.Run, "toolworker": toolworkercmd.Run}
	for name, cmd := range commands {
		t.Run(name, func(t *testing.T) {
			o := invocation{}.run(t, cmd)
			if o.code != cli.ExitUsage {
				t.Errorf("exit %d, want 2", o.code)
			}
			if want := name + ": --nats-url (or $NATS_URL) is required"; !strings.Contains(o.stderr, want) {
				t.Errorf("stderr %q, want %q", o.stderr, want)
			}
		})
	}
}

func TestToolworkerRejectsUnknownSkills(t *testing.T) {
	o := invocation{env: map[string]string{"NATS_URL": "nats://127.0.0.1:1"}}.run(t, toolworkercmd.Run, "--skills", "echo,teleport")
	if o.code != cli.ExitUsage || !strings.Contains(o.stderr, `--skills: unknown skill "teleport"`) {
		t.Errorf("exit %d, stderr %q; want 2 naming the skill", o.code, o.stderr)
	}
}

// The dispatcher and toolworker commands, each on their own, run a plan on
// a server NATS_URL names, and stop cleanly when their context ends.
func TestDispatcherAndToolworkerRunAPlan(t *testing.T) {
	cfg := bustest.Start(t)
	conn := bustest.Dial(t, cfg)
	env := map[string]string{"NATS_URL": cfg.URL, "PLANBUS_LOG_LEVEL": "warn"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type exit struct {
		name string
		code int
		err  *bustest.SyncBuffer
	}
	exits := make(chan exit, 2)
	start := func(name string, cmd func(context.Context, []string, cli.IO) int, args ...string) {
		var stdout, stderr bustest.SyncBuffer
		io := invocation{env: env}.io(&stdout, &stderr)
		go func() { exits <- exit{name, cmd(ctx, args, io), &stderr} }()
	}
	start("toolworker", toolworkercmd.Run, "--skills", "echo,sleep", "--id", "tw-1")
	start("dispatcher", dispatchercmd.Run)
	// The dispatcher rejects plans that use skills no worker has
	// advertised, so the plan waits for the toolworker to answer.
	deadline := time.Now().Add(wait)
	for {
		_, err := conn.NC.Request("$SRV.PING."+bus.ServiceToolworker, nil, time.Second)
		if err == nil {
			break
		}
		select {
		case e := <-exits:
			t.Fatalf("%s exited %d before serving; stderr:\n%s", e.name, e.code, e.err.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the toolworker does not answer: %v", err)
		}
	}

	p := []byte(`{"tools":[{"toolId":"A","skill":"echo","input":{"n":1}},
		{"toolId":"B","skill":"sleep","dependencies":["A"],"input":{"ms":10}}]}`)
	rctx, rcancel := context.WithTimeout(ctx, wait)
	defer rcancel()
	res, err := newClient(t, conn).ExecutePlan(rctx, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Success || toolOutcome(*res, "A").WorkerID != "tw-1" {
		t.Errorf("result %s %+v, A on %q; want success on worker tw-1", res.State, res.Error, toolOutcome(*res, "A").WorkerID)
	}

	cancel()
	for range 2 {
		select {
		case e := <-exits:
			if e.code != cli.ExitOK {
				t.Errorf("%s exited %d after its context ended, want 0; stderr:\n%s", e.name, e.code, e.err.String())
			}
		case <-time.After(wait):
			t.Fatal("a command did not stop after its context ended")
		}
	}
}

// A client command gives up on a server that does not answer, naming it,
// instead of waiting forever (the default --connect-timeout is 10s; the
// test shortens it). Both the default and the flag stay under the 15 s a
// user may wait for such an answer.
func TestClientCommandsGiveUpOnAnUnreachableServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + l.Addr().String()
	_ = l.Close() // nothing listens there now
	for _, args := range [][]string{
		{"run", "--nats-url", url, "--connect-timeout", "1s", example(t, "diamond.json")},
		{"status", "--nats-url", url, "--connect-timeout", "1s", "some-request"},
	} {
		t.Run(args[0], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			var stdout, stderr bustest.SyncBuffer
			code := Run(ctx, args, invocation{}.io(&stdout, &stderr))
			if ctx.Err() != nil {
				t.Fatalf("planner %s still waiting after 15s; stderr:\n%s", args[0], stderr.String())
			}
			if code != cli.ExitFailed {
				t.Errorf("exit %d, want %d", code, cli.ExitFailed)
			}
			for _, want := range []string{url, "did not answer within 1s"} {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
				}
			}
			// One line says what it waits for, not one a try.
			if n := strings.Count(stderr.String(), "waiting for NATS"); n != 1 {
				t.Errorf("%d lines of waiting for NATS, want 1:\n%s", n, stderr.String())
			}
		})
	}
	f := cli.NewFlags("x", io.Discard, func(string) string { return "" }, "")
	var c cli.Common
	c.RegisterClient(f)
	if err := f.Parse(nil); err != nil || c.Bus.ConnectTimeout <= 0 || c.Bus.ConnectTimeout >= 15*time.Second {
		t.Errorf("default --connect-timeout %s (%v), want one below 15s", c.Bus.ConnectTimeout, err)
	}
}
