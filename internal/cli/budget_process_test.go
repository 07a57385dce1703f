package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
)

// runawayHTN is a request whose search never ends: each decomposition
// adds a node, and nothing ever applies. Without a working budget it takes
// a node's memory (gigabytes in seconds).
const runawayHTN = `{"kind":"htn","htn":{"program":"loop(?x) :- if(), do(loop(?x)).","goal":"loop(1)"}}`

// TestRunawayHTNRequestsAreBounded runs `planner serve` as a user does and
// sends it four runaway HTN requests at once: each ends within 10 s with a
// budget error after one attempt (a deterministic planner would run out the
// same way again), and the process's peak RSS (VmHWM, which also covers the
// embedded NATS server) stays under 512 MiB.
func TestRunawayHTNRequestsAreBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a planner process; skipped with -short")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc to read the peak RSS from")
	}
	bin := buildPlanner(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(),
		"--workers", "1", "--log-format", "json")
	// The defaults are under test: no GC settings of the test's own.
	var env []string
	for _, kv := range processEnv(t) {
		if !strings.HasPrefix(kv, "GOMEMLIMIT=") && !strings.HasPrefix(kv, "GOGC=") {
			env = append(env, kv)
		}
	}
	cmd.Dir, cmd.Env = bustest.RepoRoot(t), env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	url, logs := serveURL(t, stderr)

	conn, err := bus.Dial(ctx, bus.Config{URL: url}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	type result struct {
		out     *planbus.Outcome
		elapsed time.Duration
		err     error
	}
	results := make(chan result, 4)
	for range 4 {
		go func() {
			start := time.Now()
			out, err := newClient(t, conn).Run(ctx, []byte(runawayHTN), nil)
			results <- result{out, time.Since(start), err}
		}()
	}
	for range 4 {
		var r result
		select {
		case r = <-results:
		case <-ctx.Done():
			t.Fatalf("four runaway requests did not all end; planner logs:\n%s", logs.String())
		}
		if r.err != nil {
			t.Fatal(r.err)
		}
		o := r.out
		if o.Error == nil || (o.Error.Code != planbus.CodeHTNMemoryBudget && o.Error.Code != "HTN_TIME_BUDGET") || o.Attempts != 1 || o.Success {
			t.Errorf("outcome %s after %d attempts, error %+v; want a budget error after 1 attempt", o.Status, o.Attempts, o.Error)
			continue
		}
		t.Logf("request %s: %s after %s: %s", o.RequestID, o.Error.Code, r.elapsed.Round(time.Millisecond), o.Error.Message)
	}
	// One runaway request on its own ends by its budget too (ctx's
	// deadline catches one that does not end; how soon is not asserted).
	start := time.Now()
	one, err := newClient(t, conn).Run(ctx, []byte(runawayHTN), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a runaway request alone ended in %s", time.Since(start).Round(time.Millisecond))
	if one.Attempts != 1 || one.Error == nil || !strings.HasSuffix(string(one.Error.Code), "_BUDGET") {
		t.Errorf("a runaway request alone: %s after %d attempts (error %+v); want a budget error after 1 attempt",
			one.Status, one.Attempts, one.Error)
	}
	peak := vmHWM(t, cmd.Process.Pid)
	t.Logf("planner serve peak RSS: %d MiB", peak>>20)
	if peak >= 512<<20 {
		t.Errorf("planner serve peak RSS %d MiB, want under 512 MiB", peak>>20)
	}
}

// serveURL reads a `planner serve --log-format json` process's stderr
// until it says it is up, and returns its NATS URL. The rest of stderr is
// collected in the returned buffer.
func serveURL(t *testing.T, stderr io.Reader) (string, *bustest.SyncBuffer) {
	t.Helper()
	var logs bustest.SyncBuffer
	found := make(chan string, 1)
	var once sync.Once
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			_, _ = logs.Write(append(sc.Bytes(), '\n'))
			var line struct {
				URL string `json:"url"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.URL != "" {
				once.Do(func() { found <- line.URL })
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	select {
	case url := <-found:
		return url, &logs
	case <-time.After(wait):
		t.Fatalf("planner serve did not come up within %s; stderr:\n%s", wait, logs.String())
	}
	return "", nil
}

// vmHWM is a process's peak resident set size, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM line %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}
