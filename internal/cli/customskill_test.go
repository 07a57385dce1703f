package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/planbus/planbus/internal/bus/bustest"
)

// TestCustomSkillExample builds examples/custom-skill as the separate
// module it is (so it can import no internal package of planbus), joins it
// to a `planner serve` process and runs its plan with `planner run`, with
// authorization off and on: the plan succeeds with the words counted by
// the example's own skill, whose log line names the call.
func TestCustomSkillExample(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module and runs real processes; skipped with -short")
	}
	root := bustest.RepoRoot(t)
	planner := buildPlanner(t)
	example := buildCustomSkill(t, root)
	planFile := filepath.Join(root, "examples", "custom-skill", "plan.json")

	for _, auth := range []bool{false, true} {
		name := "open"
		if auth {
			name = "auth"
		}
		t.Run(name, func(t *testing.T) {
			dataDir := t.TempDir()
			serveArgs := []string{"--data-dir", dataDir, "--workers", "1"}
			var workerArgs, clientArgs []string
			if auth {
				serveArgs = append(serveArgs, "--auth")
				seeds := filepath.Join(dataDir, "auth")
				workerArgs = []string{"--nkey", filepath.Join(seeds, "worker.nk")}
				clientArgs = []string{"--nkey", filepath.Join(seeds, "client.nk")}
			}
			serve := startServeProcess(t, planner, root, serveArgs...)
			skillLog := startCustomSkill(t, example, append([]string{"--nats-url", serve.url}, workerArgs...)...)

			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			args := append(append([]string{"run", "--nats-url", serve.url}, clientArgs...), planFile)
			cmd := exec.CommandContext(ctx, planner, args...)
			cmd.Dir, cmd.Env = root, processEnv(t)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("planner %v: %v\nstderr:\n%s\nthe example's log:\n%s", args, err, stderr.String(), skillLog.String())
			}
			res := lastResult(t, stdout.String(), stderr.String())
			if !res.Success {
				t.Fatalf("plan %s ended %s (%+v), want succeeded", res.PlanID, res.State, res.Error)
			}
			var counted *struct {
				Words, Lines, Characters int
			}
			for _, tool := range res.Tools {
				if tool.ToolID == "count" {
					if tool.Skill != "wordcount" {
						t.Errorf("tool count ran skill %q, want wordcount", tool.Skill)
					}
					if err := json.Unmarshal(tool.Output, &counted); err != nil {
						t.Fatalf("output of count %s: %v", tool.Output, err)
					}
				}
			}
			if counted == nil || counted.Words != 12 || counted.Lines != 2 || counted.Characters != 68 {
				t.Errorf("counted %+v, want 12 words, 2 lines, 68 characters", counted)
			}
			// The handler logged through the logger the worker put in its
			// context.
			for _, want := range []string{"counted", "plan_id=" + res.PlanID, "tool_id=count", "skill=wordcount", "attempt=1"} {
				if !strings.Contains(skillLog.String(), want) {
					t.Errorf("the example's log does not say %q:\n%s", want, skillLog.String())
				}
			}
		})
	}
}

// buildCustomSkill builds examples/custom-skill with `go build` in its own
// directory, as its own module, into a temporary directory.
func buildCustomSkill(t *testing.T, root string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH, so the example cannot be built")
	}
	bin := filepath.Join(t.TempDir(), "custom-skill")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(root, "examples", "custom-skill")
	cmd.Env = append(processEnv(t), "GOWORK=off", "GOFLAGS=-mod=readonly")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build in examples/custom-skill: %v\n%s", err, out)
	}
	return bin
}

// startCustomSkill starts the example's binary and waits until it says it
// serves wordcount; t.Cleanup stops it with SIGTERM and checks that it
// drains and exits 0. It returns the process's log.
func startCustomSkill(t *testing.T, bin string, args ...string) *bustest.SyncBuffer {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = processEnv(t)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log bustest.SyncBuffer
	up, drained := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(stderr)
		said := false
		for sc.Scan() {
			_, _ = log.Write([]byte(sc.Text() + "\n"))
			if !said && strings.Contains(sc.Text(), "custom-skill: serving wordcount") {
				said = true
				close(up)
			}
		}
	}()
	exited := make(chan struct{})
	var waitErr error // set before exited is closed
	go func() {
		<-drained // Wait closes the pipe, so it must come after the last read
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
			if waitErr != nil {
				t.Errorf("the example after SIGTERM: %v, want exit 0; its log:\n%s", waitErr, log.String())
			}
		case <-time.After(wait):
			_ = cmd.Process.Kill()
			t.Errorf("the example did not exit within %s of SIGTERM; its log:\n%s", wait, log.String())
		}
	})
	select {
	case <-up:
	case <-exited:
		t.Fatalf("the example exited before it served: %v; its log:\n%s", waitErr, log.String())
	case <-time.After(wait):
		t.Fatalf("the example did not serve within %s; its log:\n%s", wait, log.String())
	}
	return &log
}
