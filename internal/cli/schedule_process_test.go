package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus/bustest"
)

// A schedule added with `planner schedule add` keeps ticking after a
// restart of everything (`planner serve` stopped, and started again on
// its data directory): the ticks after the restart are submitted and
// run, and `planner schedule ls` counts them on from before. Of the ticks
// due while everything was down, a schedule that skips (the default) makes
// no request, and one added with --missed catchup makes one.
func TestAScheduleSurvivesARestartOfEverything(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped with -short")
	}
	bin := buildPlanner(t)
	root := bustest.RepoRoot(t)
	data := t.TempDir()
	planFile := filepath.Join(t.TempDir(), "tick.json")
	if err := os.WriteFile(planFile, []byte(`{"tools":[{"toolId":"a","skill":"echo","input":{"tick":true}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	planner := func(url string, args ...string) (string, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir, cmd.Env = root, append(processEnv(t), "NATS_URL="+url)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	ticks := func(url string) planbus.Schedule {
		t.Helper()
		out, stderr, err := planner(url, "schedule", "ls", "--json")
		var list planbus.ScheduleList
		if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list.Schedules) != 2 || list.Schedules[1].Name != "tick" {
			t.Fatalf("planner schedule ls --json: %v %q %s", err, out, stderr)
		}
		return list.Schedules[1]
	}
	listed := func(url, text string) []string {
		t.Helper()
		out, stderr, err := planner(url, "ls", "--json", "--text", text)
		var list planbus.ListReply
		if err != nil || json.Unmarshal([]byte(out), &list) != nil {
			t.Fatalf("planner ls --text %s: %v %q %s", text, err, out, stderr)
		}
		var ids []string
		for _, r := range list.Requests {
			ids = append(ids, r.RequestID)
		}
		return ids
	}

	serve := startServeProcess(t, bin, root, "--data-dir", data, "--workers", "1", "--http", "")
	// Flags after the arguments, as people write them.
	out, stderr, err := planner(serve.url, "schedule", "add", "tick", planFile, "--cron", "@every 1s")
	if err != nil || !strings.Contains(out, "schedule tick added: @every 1s") {
		t.Fatalf("schedule add: %v\n%s%s", err, out, stderr)
	}
	out, stderr, err = planner(serve.url, "schedule", "add", "catchup", "--missed", "catchup", "--cron", "@every 1s", planFile)
	if err != nil {
		t.Fatalf("schedule add --missed catchup: %v\n%s%s", err, out, stderr)
	}
	var before planbus.Schedule
	bustest.Eventually(t, wait, "two ticks", func() (bool, string) {
		before = ticks(serve.url)
		return before.Ticks >= 2, before.LastRequestID
	})

	// Everything stops: the embedded server and the planner with it.
	if err := serve.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- serve.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("planner serve stopped with %v", err)
		}
	case <-time.After(wait):
		t.Fatal("planner serve did not stop")
	}
	// Everything stays down for a few ticks.
	down := time.Now()
	bustest.Eventually(t, wait, "three seconds down", func() (bool, string) { return time.Since(down) > 3*time.Second, "" })
	again := startServeProcess(t, bin, root, "--data-dir", data, "--workers", "1", "--http", "")
	var after planbus.Schedule
	bustest.Eventually(t, wait, "ticks after the restart", func() (bool, string) {
		after = ticks(again.url)
		return after.Ticks >= before.Ticks+2 && after.LastRequestID != before.LastRequestID, after.LastRequestID
	})
	if after.Paused || after.Cron != "@every 1s" || !after.CreatedAt.Equal(before.CreatedAt) {
		t.Errorf("after the restart: %+v, before: %+v", after, before)
	}
	if ids := listed(again.url, "tick-missed"); len(ids) != 0 {
		t.Errorf("the schedule that skips made %v of its missed ticks", ids)
	}
	if ids := listed(again.url, "catchup-missed"); len(ids) != 1 {
		t.Errorf("the schedule that catches up made %v of its missed ticks, want one request", ids)
	}
	// The last tick's request ran.
	out, stderr, err = planner(again.url, "watch", after.LastRequestID)
	if err != nil {
		t.Fatalf("planner watch %s: %v\n%s%s", after.LastRequestID, err, out, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var outcome planbus.Outcome
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &outcome); err != nil || !outcome.Success {
		t.Errorf("%s: outcome %q (%v), want success", after.LastRequestID, lines[len(lines)-1], err)
	}
}
