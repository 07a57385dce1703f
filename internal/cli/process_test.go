package cli

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus/bustest"
)

// buildPlanner builds cmd/planner into a temporary directory.
func buildPlanner(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH, so the planner binary cannot be built")
	}
	bin := filepath.Join(t.TempDir(), "planner")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", bin, "./cmd/planner")
	cmd.Dir = bustest.RepoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/planner: %v\n%s", err, out)
	}
	return bin
}

// processEnv is this process's environment without the variables that
// would point the planner elsewhere, and with a private temporary
// directory for its embedded server's store.
func processEnv(t *testing.T) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NATS_") && !strings.HasPrefix(kv, "PLANBUS_") && !strings.HasPrefix(kv, "TMPDIR=") {
			env = append(env, kv)
		}
	}
	return append(env, "TMPDIR="+t.TempDir())
}

// The planner binary, as a user runs it: its exit codes and streams cross
// a real process boundary.
func TestPlannerProcess(t *testing.T) {
	bin := buildPlanner(t)
	root := bustest.RepoRoot(t)
	run := func(t *testing.T, args ...string) (code int, stdout, stderr string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir, cmd.Env = root, processEnv(t)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		switch {
		case ctx.Err() != nil:
			t.Fatalf("planner %v did not finish within %s; stderr:\n%s", args, wait, errOut.String())
		case errors.As(err, &exit):
			return exit.ExitCode(), out.String(), errOut.String()
		case err != nil:
			t.Fatalf("planner %v: %v", args, err)
		}
		return 0, out.String(), errOut.String()
	}

	t.Run("diamond", func(t *testing.T) {
		code, stdout, stderr := run(t, "run", "examples/plans/diamond.json")
		if code != ExitOK {
			t.Fatalf("exit %d, want 0; stderr:\n%s", code, stderr)
		}
		if res := lastResult(t, stdout, stderr); !res.Success || res.State != planbus.PlanSucceeded {
			t.Errorf("result %s success %v, want succeeded", res.State, res.Success)
		}
	})
	t.Run("cycle", func(t *testing.T) {
		code, stdout, stderr := run(t, "run", "examples/plans/cycle.json")
		if code != ExitUsage || !strings.Contains(stderr, "cycle: B -> C -> B") {
			t.Errorf("exit %d, stderr %q; want 2 and the cycle named", code, stderr)
		}
		if stdout != "" {
			t.Errorf("stdout %q, want nothing", stdout)
		}
	})
	t.Run("protected mode", func(t *testing.T) {
		// Refused before anything listens, so no port but loopback is
		// ever taken.
		code, _, stderr := run(t, "serve", "--listen", "0.0.0.0:4222")
		if code != ExitUsage || !strings.Contains(stderr, "--auth") {
			t.Errorf("exit %d, stderr %q; want 2 and --auth named", code, stderr)
		}
	})
	t.Run("interrupted", func(t *testing.T) {
		// SIGINT while a call runs ends the run with 130 and no result.
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "run", "--drain-timeout", "100ms", "-")
		cmd.Dir, cmd.Env = root, processEnv(t)
		cmd.Stdin = strings.NewReader(`{"tools":[{"toolId":"long","skill":"sleep","input":{"ms":600000},"timeoutMs":600000}]}`)
		var out strings.Builder
		cmd.Stdout = &out
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		started, drained := make(chan struct{}), make(chan struct{})
		var errOut bustest.SyncBuffer
		go func() {
			defer close(drained)
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				_, _ = errOut.Write([]byte(sc.Text() + "\n"))
				if strings.Contains(sc.Text(), "long") && strings.Contains(sc.Text(), "started on") {
					close(started)
					break
				}
			}
			_, _ = io.Copy(io.Discard, stderr)
		}()
		select {
		case <-started:
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			t.Fatalf("the call did not start within %s; stderr:\n%s", wait, errOut.String())
		}
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		<-drained // Wait closes the pipe, so it must come after the last read
		err = cmd.Wait()
		var exit *exec.ExitError
		if ctx.Err() != nil || !errors.As(err, &exit) || exit.ExitCode() != ExitSignal {
			t.Errorf("after SIGINT: %v, want exit %d", err, ExitSignal)
		}
		if out.String() != "" {
			t.Errorf("stdout %q, want no result", out.String())
		}
	})
	t.Run("data dir in use", func(t *testing.T) {
		// A second planner serve on a data dir a running one holds exits at
		// once, naming the holder's PID, and leaves the first one working.
		dir := t.TempDir()
		first := startServeProcess(t, bin, root, "--data-dir", dir, "--workers", "1")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", dir)
		cmd.Dir, cmd.Env = root, processEnv(t)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if ctx.Err() != nil || !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Fatalf("second serve: %v (within 5s: %v), want a non-zero exit; output:\n%s", err, ctx.Err() == nil, out)
		}
		pid := strconv.Itoa(first.cmd.Process.Pid)
		for _, want := range []string{"in use", pid} {
			if !strings.Contains(string(out), want) {
				t.Errorf("second serve's output does not say %q:\n%s", want, out)
			}
		}
		if b, err := os.ReadFile(filepath.Join(dir, "planbus.lock")); err != nil || strings.TrimSpace(string(b)) != pid {
			t.Errorf("lock file holds %q (%v), want the first server's PID %s", b, err, pid)
		}
		code, stdout, stderr := run(t, "run", "--nats-url", first.url, "examples/plans/diamond.json")
		if res := lastResult(t, stdout, stderr); code != ExitOK || !res.Success {
			t.Errorf("a plan on the first server after the refused start: exit %d, %s", code, res.State)
		}
	})
}

// serveProcess is a planner serve subprocess.
type serveProcess struct {
	cmd *exec.Cmd
	url string
}

// startServeProcess starts planner serve on a free port and waits until it says
// it is up; t.Cleanup stops it.
func startServeProcess(t *testing.T, bin, dir string, args ...string) *serveProcess {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Dir, cmd.Env = dir, processEnv(t)
	url, _ := startWatched(t, cmd, "planner serve", func(line string) (string, bool) {
		i := strings.Index(line, "url=nats://")
		if i < 0 || !strings.Contains(line, "node up") {
			return "", false
		}
		return strings.Fields(line[i+len("url="):])[0], true
	})
	return &serveProcess{cmd: cmd, url: url}
}

// startWatched starts cmd, has it stopped when the test ends (SIGTERM,
// then a kill after 30 s), and waits until match finds what it looks for
// in a line of its stderr: it returns that, and the stderr the process
// writes, kept as it goes on. what names the process in a failure.
func startWatched(t *testing.T, cmd *exec.Cmd, what string, match func(line string) (string, bool)) (string, *bustest.SyncBuffer) {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	found := make(chan string, 1)
	log := &bustest.SyncBuffer{}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			_, _ = log.Write([]byte(line + "\n"))
			if v, ok := match(line); ok {
				select {
				case found <- v:
				default:
				}
			}
		}
	}()
	select {
	case v := <-found:
		return v, log
	case <-time.After(wait):
		t.Fatalf("%s did not come up within %s; stderr:\n%s", what, wait, log.String())
	}
	return "", nil
}
