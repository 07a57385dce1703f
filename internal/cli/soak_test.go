package cli

import (
	"bufio"
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
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/planner"
)

var (
	soakPlans = flag.Int("soak.plans", 0, "plans TestSoak submits; 0 leaves the soak out (make soak runs 1000)")
	soakRate  = flag.Float64("soak.rate", 20, "plans TestSoak submits per second")
	soakKill  = flag.Duration("soak.kill-every", 3*time.Second, "how often TestSoak kills -9 an extra worker or dispatcher")
	soakURL   = flag.String("soak.nats-url", "", "TestSoakAgainst: the running system to load (scripts/cluster-chaos)")
	soakNkey  = flag.String("soak.nkey", "", "TestSoakAgainst: the nkey seed to connect with (a client's)")
)

// soakShape is one kind of plan the soak submits, with the outcome it
// must reach and the side effects it must leave.
type soakShape struct {
	name    string
	tools   func(key func(tool string) string) string // the plan's tools as JSON
	success bool
	effects []string // tools whose side effect must be in the ledger when the plan ends
	never   []string // tools whose side effect must not be there (they are skipped)
}

// ledgerTool appends its key to the ledger, once: it looks for the key
// first, the way a tool uses the idempotency key it is handed, and it
// records every run in a second file so re-runs show. Then it works for a
// moment, so that workers are killed while calls run: such a call is run
// again by another worker once its ack wait is over (at least once), and
// its side effect must still be in the ledger once.
func ledgerTool(id, key string, deps ...string) string {
	d, _ := json.Marshal(deps)
	if deps == nil {
		d = []byte("[]")
	}
	return fmt.Sprintf(`{"toolId":%q,"skill":"shell","dependencies":%s,"input":{"argv":["sh","-c",`+
		`"grep -qxF \"$KEY\" \"$LEDGER\" 2>/dev/null || echo \"$KEY\" >> \"$LEDGER\"; echo \"$KEY\" >> \"$RUNS\"; sleep 0.3"],`+
		`"env":{"KEY":%q}}}`, id, d, key)
}

var soakShapes = []soakShape{
	{
		name: "diamond", success: true, effects: []string{"B"},
		tools: func(key func(string) string) string {
			return `{"toolId":"A","skill":"echo","input":{"n":1}},` + ledgerTool("B", key("B"), "A") +
				`,{"toolId":"C","skill":"sleep","dependencies":["A"],"input":{"ms":100}},` +
				`{"toolId":"D","skill":"echo","dependencies":["B","C"],"input":{"b":{"$ref":"B"}}}`
		},
	},
	{
		name: "chain", success: true, effects: []string{"c2", "c4"},
		tools: func(key func(string) string) string {
			return `{"toolId":"c1","skill":"echo"},` + ledgerTool("c2", key("c2"), "c1") +
				`,{"toolId":"c3","skill":"sleep","dependencies":["c2"],"input":{"ms":50}},` + ledgerTool("c4", key("c4"), "c3")
		},
	},
	{
		name: "retry", success: true, effects: []string{"G"},
		tools: func(key func(string) string) string {
			return `{"toolId":"F","skill":"fail","input":{"attempts":2,"category":"network"},` +
				`"retryPolicy":{"maxAttempts":3,"backoffMs":100}},` + ledgerTool("G", key("G"), "F")
		},
	},
	{
		name: "hard failure", success: false, never: []string{"I"},
		tools: func(key func(string) string) string {
			return `{"toolId":"H","skill":"fail","input":{"category":"permanent"}},` + ledgerTool("I", key("I"), "H")
		},
	},
}

// clusterShapes are the soak's shapes without the shell (the images have
// none): sleeps stand where the ledger tools were, so kills land mid-call.
var clusterShapes = []soakShape{
	{name: "diamond", success: true, tools: func(func(string) string) string {
		return `{"toolId":"A","skill":"echo","input":{"n":1}},{"toolId":"B","skill":"sleep","dependencies":["A"],"input":{"ms":300}},` +
			`{"toolId":"C","skill":"sleep","dependencies":["A"],"input":{"ms":100}},` +
			`{"toolId":"D","skill":"echo","dependencies":["B","C"],"input":{"b":{"$ref":"B"}}}`
	}},
	{name: "chain", success: true, tools: func(func(string) string) string {
		return `{"toolId":"c1","skill":"echo"},{"toolId":"c2","skill":"sleep","dependencies":["c1"],"input":{"ms":300}},` +
			`{"toolId":"c3","skill":"sleep","dependencies":["c2"],"input":{"ms":50}},{"toolId":"c4","skill":"echo","dependencies":["c3"]}`
	}},
	{name: "retry", success: true, tools: func(func(string) string) string {
		return `{"toolId":"F","skill":"fail","input":{"attempts":2,"category":"network"},"retryPolicy":{"maxAttempts":3,"backoffMs":100}},` +
			`{"toolId":"G","skill":"echo","dependencies":["F"]}`
	}},
	{name: "hard failure", success: false, tools: func(func(string) string) string {
		return `{"toolId":"H","skill":"fail","input":{"category":"permanent"}},{"toolId":"I","skill":"echo","dependencies":["H"]}`
	}},
}

// TestSoakAgainst loads a running system (-soak.nats-url, e.g. the compose
// cluster while scripts/cluster-chaos breaks it) with -soak.plans plans of
// the cluster shapes and checks that every one ends as its shape implies.
func TestSoakAgainst(t *testing.T) {
	if *soakURL == "" || *soakPlans == 0 {
		t.Skip("loads a running system only when asked: -soak.nats-url URL -soak.plans N (scripts/cluster-chaos)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(float64(*soakPlans) / *soakRate * float64(time.Second))+5*time.Minute)
	defer cancel()
	conn, err := bus.Dial(ctx, bus.Config{URL: *soakURL, NKeySeedFile: *soakNkey, Role: bus.RoleClient}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ld := &soakLoad{t: t, conn: conn, n: *soakPlans, rate: *soakRate, shapes: clusterShapes}
	var submitted atomic.Int64
	ld.submit(ctx, &submitted)
	ld.collect(ctx)
	summary := fmt.Sprintf("%s; %s", ld.count("", ""), time.Since(ld.start).Round(time.Second))
	fmt.Fprintln(os.Stderr, summary)
	t.Log(summary)
}

// TestSoak submits -soak.plans plans of four shapes (diamonds, chains,
// retries, hard failures; shell side effects appended to a ledger) to a
// system of real processes while an extra worker or dispatcher is killed
// -9 every -soak.kill-every and the embedded server (the planner serve
// process, with the planner, a dispatcher and workers in it) twice. Every
// accepted request must end with the outcome its shape implies, every
// side effect of a finished tool must be in the ledger once, and none of a
// skipped one. It prints the counts.
func TestSoak(t *testing.T) {
	if *soakPlans == 0 {
		t.Skip("the soak runs only when asked: go test -run TestSoak ./internal/cli/ -soak.plans 1000 (make soak)")
	}
	n := *soakPlans
	bins := buildCommands(t)
	dir := t.TempDir()
	ledger, runs := filepath.Join(dir, "ledger"), filepath.Join(dir, "runs")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	url := "nats://" + addr
	env := append(processEnv(t), "PLANBUS_LOG_LEVEL=warn", "LEDGER="+ledger, "RUNS="+runs)
	p := &procs{t: t, bins: bins, env: env}
	t.Cleanup(p.stopAll)

	fast := []string{"--dispatcher-ack-wait", "2s"}
	skills := []string{"--ack-wait", "2s", "--skills", "echo,sleep,fail,shell", "--shell-allow", "sh",
		"--shell-pass-env", "HOME,LEDGER,RUNS", "--shell-env-allow", "KEY", "--shell-dir", dir}
	serveArgs := append(append([]string{"serve", "--listen", addr, "--data-dir", filepath.Join(dir, "store"),
		"--workers", "2", "--planner-ack-wait", "2s"}, fast...), skills...)
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
	extras := []*exec.Cmd{
		p.start("dispatcher", append([]string{"--nats-url", url}, fast...)...),
		p.start("dispatcher", append([]string{"--nats-url", url}, fast...)...),
		p.start("toolworker", append([]string{"--nats-url", url}, skills...)...),
		p.start("toolworker", append([]string{"--nats-url", url}, skills...)...),
	}
	extraArgs := func(i int) (string, []string) {
		if i < 2 {
			return "dispatcher", append([]string{"--nats-url", url}, fast...)
		}
		return "toolworker", append([]string{"--nats-url", url}, skills...)
	}

	// The chaos: an extra process killed and started again every few
	// seconds; the server killed when a third and two thirds of the plans
	// are submitted.
	var submitted atomic.Int64
	var killedExtras, killedServers atomic.Int64
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
			p.kill9(extras[i])
			name, args := extraArgs(i)
			extras[i] = p.start(name, args...)
			killedExtras.Add(1)
			if len(serverKills) == 0 && serverKillsDone != nil {
				close(serverKillsDone)
				serverKillsDone = nil
			}
			if len(serverKills) > 0 && submitted.Load() >= serverKills[0] {
				serverKills = serverKills[1:]
				p.kill9(server)
				killedServers.Add(1)
				killedAt := time.Now()
				fmt.Fprintf(os.Stderr, "soak: killed the embedded server (planner serve) after %d plans\n", submitted.Load())

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
	ld := &soakLoad{t: t, conn: conn, n: n, rate: *soakRate, shapes: soakShapes}
	ld.submit(ctx, &submitted)
	select {
	case <-serverKillsOver:
	case <-chaosDone:
	case <-ctx.Done():
	}
	ld.collect(ctx)
	close(stopChaos)
	<-chaosDone

	c := ld.count(ledger, runs)
	summary := fmt.Sprintf("%s; killed -9: %d workers/dispatchers, %d embedded servers; %s",
		c, killedExtras.Load(), killedServers.Load(), time.Since(ld.start).Round(time.Second))
	fmt.Fprintln(os.Stderr, summary)
	t.Log(summary)
	if killedServers.Load() < 2 && n >= 6 {
		t.Errorf("the embedded server was killed %d times, want 2", killedServers.Load())
	}
}

// soakLoad submits plans of its shapes at a rate and collects their
// outcomes.
type soakLoad struct {
	t      *testing.T
	conn   *bus.Conn
	n      int
	rate   float64
	shapes []soakShape

	start    time.Time
	sent     []soakSent
	rejected int
	outcomes map[string]*planner.Outcome
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
		key := func(tool string) string { return id + "/" + tool }
		doc := fmt.Sprintf(`{"requestId":%q,"sessionId":%q,"kind":"plan","plan":{"timeoutMs":300000,"tools":[%s]}}`,
			id, id, shape.tools(key))
		for {
			if ctx.Err() != nil {
				t.Fatalf("submitting plan %d: %v", i, ctx.Err())
			}
			reply, err := ld.conn.NC.Request(bus.SubjectPlanRequest, []byte(doc), 5*time.Second)
			if err != nil {
				continue
			}
			var a planner.Accepted
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
	ld.outcomes = map[string]*planner.Outcome{}
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
			var o planner.Outcome
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

// count checks every outcome against its shape and, when ledger is set,
// the side effects against the ledger; it returns the counts in words.
func (ld *soakLoad) count(ledger, runs string) string {
	t := ld.t
	lines := func(path string) map[string]int {
		counts := map[string]int{}
		if path == "" {
			return counts
		}
		fh, err := os.Open(path)
		if err != nil {
			return counts
		}
		defer fh.Close()
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			counts[sc.Text()]++
		}
		return counts
	}
	inLedger, ran := lines(ledger), lines(runs)
	var lost, wrong, missingEffects, strayEffects, duplicates, reruns, succeeded, failed int
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
		if o.Success != s.shape.success {
			wrong++
			t.Errorf("request %s (%s): outcome %s, want success %v: %+v\n%s", s.id, s.shape.name, o.Status, s.shape.success, o.Error, ld.diagnose(s.id))
		}
		if ledger == "" {
			continue
		}
		for _, tool := range s.shape.effects {
			if inLedger[s.id+"/"+tool] == 0 && o.Success {
				missingEffects++
				t.Errorf("request %s: %s succeeded but its side effect is not in the ledger", s.id, tool)
			}
		}
		for _, tool := range s.shape.never {
			if inLedger[s.id+"/"+tool] > 0 {
				strayEffects++
				t.Errorf("request %s: %s ran although it depends on a failed tool", s.id, tool)
			}
		}
	}
	for key, c := range inLedger {
		if c > 1 {
			duplicates++
			t.Errorf("side effect %s is in the ledger %d times", key, c)
		}
	}
	for _, c := range ran {
		if c > 1 {
			reruns++
		}
	}
	out := fmt.Sprintf("soak: submitted %d, rejected %d, terminal %d (succeeded %d, failed %d), lost %d, wrong outcome %d",
		ld.n, ld.rejected, len(ld.outcomes), succeeded, failed, lost, wrong)
	if ledger != "" {
		out += fmt.Sprintf("; side effects: %d in the ledger, %d duplicate, %d missing, %d of skipped tools, "+
			"%d calls run more than once (at-least-once: a worker died running them)",
			len(inLedger), duplicates, missingEffects, strayEffects, reruns)
	}
	return out
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
