package cli

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
)

// TestAcknowledgedResultsSurviveKillNineOfTheServer publishes tool
// results into planner serve's embedded server, kills the process with
// SIGKILL while results are still being published, starts it again on
// the same store, and reads back every result whose publish was
// acknowledged: at the default durability (--sync always) an
// acknowledgement means the result is on the disk, so none may be
// missing or changed. (The same test with the results stream in
// nats-server's async persist mode loses about a tenth of them.)
func TestAcknowledgedResultsSurviveKillNineOfTheServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a real planner process; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := startServe(ctx, t, "--workers", "0")
	conn := s.dial()

	// Publishers send results until the server dies; each acknowledged
	// one is noted with its stream sequence. The kill comes once enough
	// are acknowledged, with publishes still in flight.
	const publishers, killAfter = 8, 400
	type stored struct {
		seq  uint64
		data []byte
	}
	var mu sync.Mutex
	var acked []stored
	enough := make(chan struct{})
	var wg sync.WaitGroup
	for w := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				data := fmt.Appendf(nil, `{"planId":"p%d","toolId":"t%d","attempt":1,"state":"succeeded","output":%d}`, w, i, i)
				pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
				ack, err := conn.JS.Publish(pctx, bus.ResultSubject(fmt.Sprintf("durable-%d", w))+".t", data)
				pcancel()
				if err != nil {
					return // the server is gone
				}
				mu.Lock()
				acked = append(acked, stored{ack.Sequence, data})
				if len(acked) == killAfter {
					close(enough)
				}
				mu.Unlock()
			}
		}()
	}
	select {
	case <-enough:
	case <-ctx.Done():
		t.Fatal("the results were not acknowledged in time")
	}
	s.kill9()
	wg.Wait()
	conn.Close()
	mu.Lock()
	n := len(acked)
	mu.Unlock()

	s.restart()
	conn = s.dial()
	defer conn.Close()
	results, err := conn.JS.Stream(ctx, bus.StreamResults)
	if err != nil {
		t.Fatal(err)
	}
	missing := 0
	for _, a := range acked {
		m, err := results.GetMsg(ctx, a.seq)
		switch {
		case err != nil:
			missing++
			if missing <= 5 {
				t.Errorf("result at sequence %d, acknowledged before the kill: %v", a.seq, err)
			}
		case !bytes.Equal(m.Data, a.data):
			t.Errorf("result at sequence %d is %s after the restart, was acknowledged as %s", a.seq, m.Data, a.data)
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged results are missing after kill -9 of the server", missing, n)
	}
	t.Logf("%d results acknowledged before the kill, all read back after the restart", n)
}

// TestPlansRunningWhenTheServerIsKilledFinishAfterItsRestart runs fan-outs
// and chains in planner serve (the embedded server, its dispatcher and
// workers in one process), kills the process with SIGKILL while their
// tools run, starts it again on the same store and waits for every plan:
// each finishes, with every tool succeeded. At the default durability
// the plan states and calls are written behind (bus.Config.WriteBehind):
// what the kill lost of them is derived again from the results and timers
// the dispatcher had not acknowledged yet.
func TestPlansRunningWhenTheServerIsKilledFinishAfterItsRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a real planner process; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s := startServe(ctx, t)
	conn := s.dial()
	defer conn.Close()
	c := newClient(t, conn)

	// Four fan-outs of 60 sleeps and four chains of 30: the kill finds
	// calls queued, running and finished, and states mid-way.
	const fanout, chain = 60, 30
	var docs []string
	for range 4 {
		tools := []string{`{"toolId":"root","skill":"echo","input":{}}`}
		var join []string
		for i := range fanout {
			tools = append(tools, fmt.Sprintf(`{"toolId":"f%d","skill":"sleep","dependencies":["root"],"input":{"ms":20}}`, i))
			join = append(join, fmt.Sprintf(`"f%d"`, i))
		}
		tools = append(tools, `{"toolId":"join","skill":"echo","dependencies":[`+strings.Join(join, ",")+`]}`)
		docs = append(docs, `{"tools":[`+strings.Join(tools, ",")+`],"maxConcurrency":8}`)
		tools = tools[:0]
		for i := range chain {
			deps := "[]"
			if i > 0 {
				deps = fmt.Sprintf(`["c%d"]`, i-1)
			}
			tools = append(tools, fmt.Sprintf(`{"toolId":"c%d","skill":"sleep","dependencies":%s,"input":{"ms":10}}`, i, deps))
		}
		docs = append(docs, `{"tools":[`+strings.Join(tools, ",")+`]}`)
	}
	var runs []*client.Run
	for _, doc := range docs {
		accepted, err := c.SubmitPlanJSON(ctx, []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, c.RunOf(accepted.RequestID))
	}
	// The kill comes once a third of the tools have a result.
	results, err := conn.JS.Stream(ctx, bus.StreamResults)
	if err != nil {
		t.Fatal(err)
	}
	total := 4 * (fanout + 2 + chain)
	for {
		info, err := results.Info(ctx)
		if err == nil && info.State.Msgs >= uint64(total/3) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the tools did not run in time:\n%s", s.output())
		case <-time.After(5 * time.Millisecond):
		}
	}
	s.kill9()
	s.restart()

	for i, run := range runs {
		out, err := run.Wait(ctx)
		if err != nil {
			t.Fatalf("plan %d: %v\nplanner serve:\n%s", i, err, s.output())
		}
		if !out.Success {
			t.Errorf("plan %d ended %s: %+v", i, out.Status, out.Error)
			continue
		}
		for _, tool := range out.Execution.Tools {
			if tool.State != planbus.ToolSucceeded {
				t.Errorf("plan %d: tool %s %s", i, tool.ToolID, tool.State)
			}
		}
	}
}

// served is a planner serve process on a store of its own, on a port of
// its own, that a test kills and starts again.
type served struct {
	ctx    context.Context
	t      *testing.T
	p      *procs
	args   []string
	url    string
	server *exec.Cmd
}

// startServe starts planner serve with extra flags.
func startServe(ctx context.Context, t *testing.T, extra ...string) *served {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	p := &procs{t: t, bins: map[string]string{"planner": buildPlanner(t)}, env: append(processEnv(t), "PLANBUS_LOG_LEVEL=error")}
	t.Cleanup(p.stopAll)
	s := &served{ctx: ctx, t: t, p: p, url: "nats://" + addr,
		args: append([]string{"serve", "--listen", addr, "--data-dir", filepath.Join(t.TempDir(), "store"), "--http", ""}, extra...)}
	s.restart()
	return s
}

// restart starts the process (again, on the same store).
func (s *served) restart() { s.server = s.p.start("planner", s.args...) }

// kill9 kills the process with SIGKILL.
func (s *served) kill9() { s.p.kill9(s.server) }

// output is what the process wrote.
func (s *served) output() string { return s.p.output(s.server) }

// dial connects once the planner answers.
func (s *served) dial() *bus.Conn {
	t := s.t
	t.Helper()
	conn, err := bus.Dial(s.ctx, bus.Config{URL: s.url}, zerolog.Nop())
	if err != nil {
		t.Fatalf("%v\nplanner serve:\n%s", err, s.output())
	}
	for {
		if _, err := conn.NC.Request("$SRV.PING."+bus.ServicePlanner, nil, time.Second); err == nil {
			return conn
		}
		select {
		case <-s.p.exited(s.server):
			t.Fatalf("planner serve exited:\n%s", s.output())
		case <-s.ctx.Done():
			t.Fatal("the planner never answered")
		default:
		}
	}
}
