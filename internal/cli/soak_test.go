package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
)

var (
	soakPlans        = flag.Int("soak.plans", 0, "plans TestSoak submits; 0 leaves the soak out (make soak runs 1000)")
	soakRate         = flag.Float64("soak.rate", 20, "plans TestSoak submits per second")
	soakKill         = flag.Duration("soak.kill-every", 3*time.Second, "how often TestSoak kills -9 an extra worker or dispatcher")
	soakURL          = flag.String("soak.nats-url", "", "TestSoakAgainst: the running system to load (scripts/cluster-chaos)")
	soakNkey         = flag.String("soak.nkey", "", "TestSoakAgainst: the nkey seed to connect with (a client's; a worker's for TestSoakLedgerWorker, an admin's for TestSoakLedgerCount)")
	soakAdminNkey    = flag.String("soak.admin-nkey", "", "TestSoakAgainst: the admin's nkey seed, to read the results stream with when it counts duplicate side effects")
	soakLedger       = flag.String("soak.ledger", "", "the ledger file the ledger workers append to (TestSoakAgainst, TestSoakLedgerWorker, TestSoakLedgerCount)")
	soakKilled       = flag.String("soak.killed", "", "a file naming the ledger workers killed: a line each, its worker id and when, in Unix nanoseconds (TestSoakAgainst, TestSoakLedgerCount)")
	soakLedgerWorker = flag.Bool("soak.ledger-worker", false, "TestSoakLedgerWorker: serve the ledger skill until killed")
	soakAckWait      = flag.Duration("soak.ack-wait", 0, "TestSoakLedgerWorker: the ack wait of the ledger skill's consumer (0: the consumer's, else 30s)")
	soakPlan         = flag.String("soak.plan", "", "TestSoakLedgerCount: the plan whose side effects to count")
	soakLogLevel     = flag.String("soak.log-level", "info", "TestSoak: the log level of the system's processes, whose lines of a plan that went wrong the test prints")
)

// soakShape is one kind of plan the soak submits, with the outcome it
// must reach and the side effects it must leave.
type soakShape struct {
	name    string
	tools   string // the plan's tools as JSON
	success bool
	effects []string // tools whose side effect must be in the ledger when the plan ends
	never   []string // tools whose side effect must not be there (they are skipped)
}

// soakShapes are the plans of the soak. Their side effects are calls of
// the ledger skill, which append to the ledger and then work 150 ms, so
// that processes are killed while calls run.
var soakShapes = []soakShape{
	{
		name: "diamond", success: true, effects: []string{"B"},
		tools: `{"toolId":"A","skill":"echo","input":{"n":1}},` + ledgerTool("B", 150, 0, "A") +
			`,{"toolId":"C","skill":"sleep","dependencies":["A"],"input":{"ms":100}},` +
			`{"toolId":"D","skill":"echo","dependencies":["B","C"],"input":{"b":{"$ref":"B"}}}`,
	},
	{
		name: "chain", success: true, effects: []string{"c2", "c4"},
		tools: `{"toolId":"c1","skill":"echo"},` + ledgerTool("c2", 150, 0, "c1") +
			`,{"toolId":"c3","skill":"sleep","dependencies":["c2"],"input":{"ms":50}},` + ledgerTool("c4", 150, 0, "c3"),
	},
	{
		// G's first attempt fails after its side effect: its second is a
		// retry, not a duplicate.
		name: "retry", success: true, effects: []string{"G"},
		tools: `{"toolId":"F","skill":"fail","input":{"attempts":2,"category":"network"},` +
			`"retryPolicy":{"maxAttempts":3,"backoffMs":100}},` + ledgerTool("G", 150, 1, "F"),
	},
	{
		name: "hard failure", success: false, never: []string{"I"},
		tools: `{"toolId":"H","skill":"fail","input":{"category":"permanent"}},` + ledgerTool("I", 150, 0, "H"),
	},
}

// TestSoakAgainst loads a running system (-soak.nats-url, e.g. the compose
// cluster while scripts/cluster-chaos breaks it) with -soak.plans plans of
// the soak's shapes, whose side effects ledger workers on that system
// append to -soak.ledger (scripts/cluster-chaos starts them), and checks
// that every plan ends as its shape implies and that no completed call
// ran again. It reads the results stream with -soak.admin-nkey to tell
// the causes of duplicate side effects apart.
func TestSoakAgainst(t *testing.T) {
	if *soakURL == "" || *soakPlans == 0 || *soakLedger == "" {
		t.Skip("loads a running system only when asked: -soak.nats-url URL -soak.plans N -soak.ledger FILE, " +
			"with ledger workers on it (scripts/cluster-chaos)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(float64(*soakPlans) / *soakRate * float64(time.Second))+5*time.Minute)
	defer cancel()
	conn, err := bus.Dial(ctx, bus.Config{URL: *soakURL, NKeySeedFile: *soakNkey, Role: bus.RoleClient}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ld := &soakLoad{t: t, conn: conn, n: *soakPlans, rate: *soakRate, shapes: soakShapes}
	var submitted atomic.Int64
	ld.submit(ctx, &submitted)
	ld.collect(ctx)

	var stored map[ledgerKey]time.Time
	if *soakAdminNkey != "" {
		stored, err = storedResultsOn(ctx, *soakURL, *soakAdminNkey)
	} else {
		stored, err = storedResults(ctx, conn.JS)
	}
	if err != nil {
		t.Errorf("the causes of duplicate side effects need the results stream (-soak.admin-nkey on a system with authentication): %v", err)
	}
	killed, err := readKilled(*soakKilled)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := ld.count(*soakLedger, stored, killed)
	summary := fmt.Sprintf("%s; %s", c, time.Since(ld.start).Round(time.Second))
	fmt.Fprintln(os.Stderr, summary)
	t.Log(summary)
}

// TestSoak submits -soak.plans plans of four shapes (diamonds, chains,
// retries, hard failures; side effects appended to a ledger) to a system
// of real processes while an extra worker or dispatcher is killed -9
// every -soak.kill-every and the embedded server (the planner serve
// process, with the planner, a dispatcher and workers in it) twice. Every
// accepted request must end with the outcome its shape implies, every
// finished tool's side effect must be in the ledger and none of a skipped
// one's, and no attempt whose result was stored may run again. The side
// effects an attempt left more than once are counted by cause; a worker
// killed in the middle of a call leaves one (at least once). It prints
// the counts.
func TestSoak(t *testing.T) {
	if *soakPlans == 0 {
		t.Skip("the soak runs only when asked: go test -run TestSoak ./internal/cli/ -soak.plans 1000 (make soak)")
	}
	n := *soakPlans
	bins := buildCommands(t)
	// The ledger workers are this test binary, run as TestSoakLedgerWorker.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bins["ledgerworker"] = self
	dir := t.TempDir()
	ledger := filepath.Join(dir, "ledger")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	url := "nats://" + addr
	env := append(processEnv(t), "PLANBUS_LOG_LEVEL="+*soakLogLevel)
	p := &procs{t: t, bins: bins, env: env}
	t.Cleanup(p.stopAll)

	// The ledger skill runs only in the ledger workers, so a kill of the
	// server never kills a worker running a side effect: what the server's
	// death does to calls shows apart from what a worker's does.
	fast := []string{"--dispatcher-ack-wait", "2s"}
	skills := []string{"--ack-wait", "2s", "--skills", "echo,sleep,fail"}
	serveArgs := append(append([]string{"serve", "--listen", addr, "--data-dir", filepath.Join(dir, "store"),
		"--workers", "2", "--planner-ack-wait", "2s"}, fast...), skills...)
	ledgerArgs := []string{"-test.run=^TestSoakLedgerWorker$", "-test.timeout=0", "-soak.ledger-worker",
		"-soak.nats-url", url, "-soak.ledger", ledger, "-soak.ack-wait", "2s"}
	server := p.start("planner", serveArgs...)

	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(n)*time.Second/4+5*time.Minute)
	defer cancel()
	conn, err := bus.Dial(ctx, bus.Config{URL: url}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitPlanner := func() {
		for ctx.Err() == nil {
			if _, err := conn.NC.Request("$SRV.PING."+bus.ServicePlanner, nil, time.Second); err == nil {
				return
			}
		}
		t.Fatal("the planner never answered")
	}
	waitPlanner()
	extraArgs := func(i int) (string, []string) {
		switch i {
		case 0, 1:
			return "dispatcher", append([]string{"--nats-url", url}, fast...)
		case 2, 3:
			return "toolworker", append([]string{"--nats-url", url}, skills...)
		}
		return "ledgerworker", ledgerArgs
	}
	extras := make([]*exec.Cmd, 6)
	for i := range extras {
		name, args := extraArgs(i)
		extras[i] = p.start(name, args...)
	}
	waitSkill(ctx, t, conn, ledgerSkillName)

	// The chaos: an extra process killed and started again every few
	// seconds; the server killed when a third and two thirds of the plans
	// are submitted.
	var submitted atomic.Int64
	var killedExtras, killedServers atomic.Int64
	killedLedger := map[string]time.Time{} // the chaos goroutine's until chaosDone
	chaosDone := make(chan struct{})
	stopChaos := make(chan struct{})
	serverKillsDone := make(chan struct{})
	serverKillsOver := serverKillsDone
	go func() {
		defer close(chaosDone)
		tick := time.NewTicker(*soakKill)
		defer tick.Stop()
		serverKills := []int64{int64(n) / 3, 2 * int64(n) / 3}

		for {
			select {
			case <-stopChaos:
				return
			case <-tick.C:
			}
			i := rand.IntN(len(extras))
			name, args := extraArgs(i)
			if name == "ledgerworker" {
				killedLedger["ledger-"+strconv.Itoa(extras[i].Process.Pid)] = time.Now()
			}
			p.kill9(extras[i])
			extras[i] = p.start(name, args...)
			killedExtras.Add(1)
			if len(serverKills) == 0 && serverKillsDone != nil {
				close(serverKillsDone)
				serverKillsDone = nil
			}
			if len(serverKills) > 0 && submitted.Load() >= serverKills[0] {
				serverKills = serverKills[1:]
				killedAt := time.Now()
				p.kill9(server)
				killedServers.Add(1)
				fmt.Fprintf(os.Stderr, "soak: killed the embedded server (planner serve) at %s, after %d plans\n",
					killedAt.Format(time.TimeOnly+".000"), submitted.Load())

				// kill9 returns once the process is gone, and the kernel
				// dropped the store's lock with it.
				server = p.start("planner", serveArgs...)
				for {
					if _, err := conn.NC.Request("$SRV.PING."+bus.ServicePlanner, nil, time.Second); err == nil {
						break
					}
					select {
					case <-p.exited(server):
						fmt.Fprintf(os.Stderr, "soak: the embedded server did not start again:\n%s", p.output(server))
						return
					default:
					}
				}
				fmt.Fprintf(os.Stderr, "soak: embedded server back after %s\n", time.Since(killedAt).Round(time.Millisecond))
			}
		}
	}()

	// Both server kills happen before the counting ends.
	ld := &soakLoad{t: t, conn: conn, n: n, rate: *soakRate, shapes: soakShapes, logs: func(planID string) string { return p.grep(planID) }}
	ld.submit(ctx, &submitted)
	select {
	case <-serverKillsOver:
	case <-chaosDone:
	case <-ctx.Done():
	}
	ld.collect(ctx)
	close(stopChaos)
	<-chaosDone

	stored, err := storedResults(ctx, conn.JS)
	if err != nil {
		t.Fatal(err)
	}
	c, d := ld.count(ledger, stored, killedLedger)
	summary := fmt.Sprintf("%s; killed -9: %d workers/dispatchers (%d ledger workers), %d embedded servers; %s",
		c, killedExtras.Load(), len(killedLedger), killedServers.Load(), time.Since(ld.start).Round(time.Second))
	fmt.Fprintln(os.Stderr, summary)
	t.Log(summary)
	for _, e := range d.examples {
		t.Log(e)
	}
	for _, k := range d.rerunCompleted {
		t.Logf("what the processes logged of %s/%s/%d:\n%s", k.planID, k.toolID, k.attempt, p.grep(k.planID))
	}
	if killedServers.Load() < 2 && n >= 6 {
		t.Errorf("the embedded server was killed %d times, want 2", killedServers.Load())
	}
}

// waitSkill waits until a worker has advertised skill: the planner
// refuses plans with skills nobody serves.
func waitSkill(ctx context.Context, t *testing.T, conn *bus.Conn, skill string) {
	t.Helper()
	kv, err := conn.JS.KeyValue(ctx, bus.BucketSkills)
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.Watch(ctx, skill)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	for e := range w.Updates() {
		if e != nil {
			return
		}
	}
	t.Fatalf("no worker advertised the %s skill: %v", skill, ctx.Err())
}

// soakLoad submits plans of its shapes at a rate and collects their
// outcomes.
type soakLoad struct {
	t      *testing.T
	conn   *bus.Conn
	n      int
	rate   float64
	shapes []soakShape

	// logs, when set, is what the system's processes logged of a plan,
	// for a failure's diagnosis.
	logs func(planID string) string

	start    time.Time
	sent     []soakSent
	rejected int
	outcomes map[string]*planbus.Outcome
}

type soakSent struct {
	id    string
	shape *soakShape
}

// submit sends the plans at the load's rate, counting them in submitted as
// they are accepted. A request whose reply is lost (a server died) is sent
// again with the same id, which JetStream de-duplicates.
func (ld *soakLoad) submit(ctx context.Context, submitted *atomic.Int64) {
	t := ld.t
	run := fmt.Sprintf("soak%d", time.Now().UnixNano()%1e6)
	gap := time.Duration(float64(time.Second) / ld.rate)
	ld.start = time.Now()
	for i := range ld.n {
		shape := &ld.shapes[i%len(ld.shapes)]
		id := fmt.Sprintf("%s-%d", run, i)
		doc := fmt.Sprintf(`{"requestId":%q,"sessionId":%q,"kind":"plan","plan":{"timeoutMs":300000,"tools":[%s]}}`,
			id, id, shape.tools)
		for {
			if ctx.Err() != nil {
				t.Fatalf("submitting plan %d: %v", i, ctx.Err())
			}
			reply, err := ld.conn.NC.Request(bus.SubjectPlanRequest, []byte(doc), 5*time.Second)
			if err != nil {
				continue
			}
			var a planbus.Accepted
			if json.Unmarshal(reply.Data, &a) == nil && a.Status == "accepted" {
				break
			}
			if strings.Contains(string(reply.Data), "INVALID_REQUEST") {
				t.Errorf("plan %d (%s) rejected: %s", i, shape.name, reply.Data)
				ld.rejected++
				break
			}
			// UNAVAILABLE while a server restarts: try again.
		}
		ld.sent = append(ld.sent, soakSent{id: id, shape: shape})
		submitted.Add(1)
		if i%100 == 99 {
			fmt.Fprintf(os.Stderr, "soak: %d/%d submitted in %s\n", i+1, ld.n, time.Since(ld.start).Round(time.Second))
		}
		time.Sleep(time.Until(ld.start.Add(time.Duration(i+1) * gap)))
	}
}

// collect waits for every outcome, reading the OUTCOMES stream by subject
// (it survives the servers' restarts), until all are there or ctx ends.
func (ld *soakLoad) collect(ctx context.Context) {
	ld.outcomes = map[string]*planbus.Outcome{}
	lastReport := time.Now()
	for len(ld.outcomes) < len(ld.sent) && ctx.Err() == nil {
		if time.Since(lastReport) >= 5*time.Second {
			lastReport = time.Now()
			fmt.Fprintf(os.Stderr, "soak: %d/%d outcomes after %s\n", len(ld.outcomes), len(ld.sent), time.Since(ld.start).Round(time.Second))
		}
		st, err := ld.conn.JS.Stream(ctx, bus.StreamOutcomes)
		if err != nil {
			continue
		}
		for _, s := range ld.sent {
			if ld.outcomes[s.id] != nil {
				continue
			}
			m, err := st.GetLastMsgForSubject(ctx, bus.OutcomeSubject(s.id))
			if errors.Is(err, jetstream.ErrMsgNotFound) || err != nil {
				continue
			}
			var o planbus.Outcome
			if err := json.Unmarshal(m.Data, &o); err != nil {
				ld.t.Errorf("outcome of %s: %v", s.id, err)
				continue
			}
			ld.outcomes[s.id] = &o
		}
		if len(ld.outcomes) < len(ld.sent) {
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
		}
	}
}

// count checks every outcome against its shape and the side effects in
// the ledger at path against the outcomes, and counts the ledger's runs
// of the load's plans by cause (countDuplicates, with the results stored
// and the ledger workers killed); it returns the counts in words.
func (ld *soakLoad) count(ledger string, stored map[ledgerKey]time.Time, killed map[string]time.Time) (string, duplicates) {
	t := ld.t
	runs, err := readLedger(ledger)
	if err != nil {
		t.Error(err)
	}
	ours := map[string]map[string]bool{} // request id: tools with a side effect
	for _, s := range ld.sent {
		ours[s.id] = map[string]bool{}
	}
	runs = slices.DeleteFunc(runs, func(r ledgerRun) bool { return ours[r.RequestID] == nil })
	for _, r := range runs {
		ours[r.RequestID][r.ToolID] = true
	}
	var lost, wrong, missingEffects, strayEffects, succeeded, failed int
	for _, s := range ld.sent {
		o := ld.outcomes[s.id]
		if o == nil {
			lost++
			if lost <= 5 {
				t.Errorf("request %s (%s): no outcome\n%s", s.id, s.shape.name, ld.diagnose(s.id))
			}
			continue
		}
		if o.Success {
			succeeded++
		} else {
			failed++
		}
		// A plan of the soak has five minutes: one that times out lost a
		// call, even where the plan was to fail anyway.
		if o.Success != s.shape.success || o.Error != nil && o.Error.Code == planbus.CodePlanTimeout {
			wrong++
			t.Errorf("request %s (%s): outcome %s, want success %v: %+v\n%s", s.id, s.shape.name, o.Status, s.shape.success, o.Error, ld.diagnose(s.id))
		}
		for _, tool := range s.shape.effects {
			if !ours[s.id][tool] && o.Success {
				missingEffects++
				t.Errorf("request %s: %s succeeded but its side effect is not in the ledger", s.id, tool)
			}
		}
		for _, tool := range s.shape.never {
			if ours[s.id][tool] {
				strayEffects++
				t.Errorf("request %s: %s ran although it depends on a failed tool", s.id, tool)
			}
		}
	}
	d := countDuplicates(runs, stored, killed)
	if d.completed > 0 {
		t.Errorf("%d re-runs of a completed call: its result was stored before it ran again", d.completed)
	}
	out := fmt.Sprintf("soak: submitted %d, rejected %d, terminal %d (succeeded %d, failed %d), lost %d, wrong outcome %d; "+
		"%s; %d missing, %d of skipped tools",
		ld.n, ld.rejected, len(ld.outcomes), succeeded, failed, lost, wrong, d, missingEffects, strayEffects)
	return out, d
}

// diagnose says what the system holds of a request that went wrong: its
// loop state, its plan's state and the plan's events still in the events
// stream, for the test's failure message.
func (ld *soakLoad) diagnose(requestID string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	get := func(bucket, key string) {
		kv, err := ld.conn.JS.KeyValue(ctx, bucket)
		if err != nil {
			fmt.Fprintf(&b, "  %s: %v\n", bucket, err)
			return
		}
		e, err := kv.Get(ctx, key)
		if err != nil {
			fmt.Fprintf(&b, "  %s %s: %v\n", bucket, key, err)
			return
		}
		v := string(e.Value())
		if len(v) > 3000 {
			v = v[:3000] + "..."
		}
		fmt.Fprintf(&b, "  %s %s (revision %d): %s\n", bucket, key, e.Revision(), v)
	}
	get(bus.BucketRequests, requestID)
	get(bus.BucketPlans, bus.StateKey(requestID+"-1"))
	if ld.logs != nil {
		fmt.Fprintf(&b, "  what the processes logged of it:\n%s", ld.logs(requestID+"-1"))
	}
	if st, err := ld.conn.JS.Stream(ctx, bus.StreamEvents); err == nil {
		for seq := uint64(1); ; {
			m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(bus.EventsOfRequest(requestID)))
			if err != nil {
				break
			}
			fmt.Fprintf(&b, "  event %s\n", m.Data)
			seq = m.Sequence + 1
		}
	}
	return b.String()
}
