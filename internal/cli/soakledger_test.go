package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/logbridge"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

// The ledger skill is the soak's side effect: each run appends one line
// to a ledger file and fsyncs it before it works, the way a tool that
// charges a card or sends a mail acts and only then reports. It does not
// look for its idempotency key first, so every run of an attempt shows:
// the ledger tells how often the system ran the same attempt.
//
// A line is "<requestId> <planId> <toolId> <attempt> <workerId> <unix ns>",
// the time when the run began.

// ledgerSkillName is the skill's name in plans.
const ledgerSkillName = "ledger"

// ledgerInput is what a call of the ledger skill takes: how long it works
// after its side effect (default 150 ms), and how many of its first
// attempts then fail with a network error, to be retried.
type ledgerInput struct {
	Ms           int `json:"ms"`
	FailAttempts int `json:"failAttempts"`
}

// ledgerSkill appends its runs to the ledger at path, naming workerID.
func ledgerSkill(path, workerID string) skill.Skill {
	return skill.Skill{
		Manifest: skill.Manifest{
			Name:        ledgerSkillName,
			Description: "Appends a line to the soak's ledger and fsyncs it, then works ms milliseconds (default 150).",
			Version:     "1",
			InputSchema: json.RawMessage(`{"type": "object", "additionalProperties": false, "properties": {
				"ms": {"type": "integer", "minimum": 0, "maximum": 60000},
				"failAttempts": {"type": "integer", "minimum": 0, "maximum": 10}}}`),
			TimeoutMs: 120000,
		},
		Handler: skill.HandlerFunc(func(ctx context.Context, call *skill.Call) (skill.Result, error) {
			in := ledgerInput{Ms: 150}
			if len(call.Input) > 0 && string(call.Input) != "null" {
				if err := skill.DecodeInput(call, &in); err != nil {
					return skill.Result{}, err
				}
			}
			line := fmt.Sprintf("%s %s %s %d %s %d\n", call.RequestID, call.PlanID, call.ToolID, call.Attempt, workerID, time.Now().UnixNano())
			if err := appendSync(path, line); err != nil {
				return skill.Result{}, skill.Transient("LEDGER", "ledger: %v", err)
			}
			select {
			case <-time.After(time.Duration(in.Ms) * time.Millisecond):
			case <-ctx.Done():
				return skill.Result{}, ctx.Err()
			}
			if call.Attempt <= in.FailAttempts {
				return skill.Result{}, skill.Network("LEDGER_FAIL", "ledger: attempt %d of %d set to fail", call.Attempt, in.FailAttempts)
			}
			return skill.Result{Output: json.RawMessage(`{"attempt":` + strconv.Itoa(call.Attempt) + `}`)}, nil
		}),
	}
}

// appendSync appends line to the file at path and flushes it to the disk.
// One write of a short line to a file opened O_APPEND lands whole, also
// with other processes appending.
func appendSync(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// ledgerWorkerID is the id a ledger worker process runs under: its pid
// tells the one to kill (scripts/cluster-chaos).
func ledgerWorkerID() string { return "ledger-" + strconv.Itoa(os.Getpid()) }

// TestSoakLedgerWorker is not a test: run with -soak.ledger-worker, the
// test binary serves the ledger skill on -soak.nats-url (as the worker
// role with -soak.nkey), appending to -soak.ledger, until it is killed or
// gets SIGTERM. TestSoak and scripts/cluster-chaos start it as a process:
//
//	cli.test -test.run '^TestSoakLedgerWorker$' -test.timeout 0 -soak.ledger-worker \
//	  -soak.nats-url URL -soak.ledger FILE [-soak.nkey worker.nk] [-soak.ack-wait 2s]
func TestSoakLedgerWorker(t *testing.T) {
	if !*soakLedgerWorker {
		t.Skip("serves the ledger skill only when asked: -soak.ledger-worker (TestSoak, scripts/cluster-chaos)")
	}
	if *soakURL == "" || *soakLedger == "" {
		t.Fatal("-soak.ledger-worker needs -soak.nats-url and -soak.ledger")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: "15:04:05.000", NoColor: true}).Level(zerolog.DebugLevel).
		With().Timestamp().Str("component", "ledger-worker").Logger()
	conn, err := bus.Dial(ctx, bus.Config{URL: *soakURL, NKeySeedFile: *soakNkey, Role: bus.RoleWorker}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	id := ledgerWorkerID()
	w, err := worker.New(conn.NC, worker.Config{ID: id, Skills: []skill.Skill{ledgerSkill(*soakLedger, id)}, AckWait: *soakAckWait},
		worker.WithLogger(logbridge.Slog(log)))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		select {
		case <-w.Ready():
			fmt.Fprintf(os.Stderr, "ledger worker %s ready\n", id)
		case <-ctx.Done():
		}
	}()
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSoakLedgerCount is not a test either: it counts the side effects of
// plan -soak.plan in -soak.ledger by cause, reading the results stream on
// -soak.nats-url (with -soak.nkey, the admin's seed on a cluster with
// authentication) and the workers killed from -soak.killed, prints them,
// and fails on a re-run of a completed call. scripts/cluster-chaos runs it
// after each scenario.
func TestSoakLedgerCount(t *testing.T) {
	if *soakPlan == "" || *soakLedger == "" || *soakURL == "" {
		t.Skip("counts a plan's side effects only when asked: -soak.plan ID -soak.ledger FILE -soak.nats-url URL (scripts/cluster-chaos)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runs, err := readLedger(*soakLedger)
	if err != nil {
		t.Fatal(err)
	}
	runs = slices.DeleteFunc(runs, func(r ledgerRun) bool { return r.PlanID != *soakPlan })
	stored, err := storedResultsOn(ctx, *soakURL, *soakNkey)
	if err != nil {
		t.Fatal(err)
	}
	killed, err := readKilled(*soakKilled)
	if err != nil {
		t.Fatal(err)
	}
	d := countDuplicates(runs, stored, killed)
	line := fmt.Sprintf("ledger: plan %s: %s", *soakPlan, d)
	fmt.Fprintln(os.Stderr, line)
	t.Log(line)
	for _, e := range d.examples {
		t.Log(e)
	}
	if d.completed > 0 {
		t.Errorf("%d re-runs of a completed call (its result was stored before it ran again)", d.completed)
	}
}

// ledgerRun is one line of the ledger.
type ledgerRun struct {
	RequestID, PlanID, ToolID string
	Attempt                   int
	WorkerID                  string
	Began                     time.Time
}

// ledgerKey is one attempt of one tool: what must run once.
type ledgerKey struct {
	planID, toolID string
	attempt        int
}

func (r ledgerRun) key() ledgerKey { return ledgerKey{r.PlanID, r.ToolID, r.Attempt} }

// readLedger reads the ledger at path; a missing file is an empty ledger.
func readLedger(path string) ([]ledgerRun, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var runs []ledgerRun
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		if len(fields) != 6 {
			return nil, fmt.Errorf("ledger %s line %d: %q: want 6 fields", path, n, sc.Text())
		}
		attempt, err1 := strconv.Atoi(fields[3])
		ns, err2 := strconv.ParseInt(fields[5], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("ledger %s line %d: %w", path, n, err)
		}
		runs = append(runs, ledgerRun{RequestID: fields[0], PlanID: fields[1], ToolID: fields[2], Attempt: attempt,
			WorkerID: fields[4], Began: time.Unix(0, ns)})
	}
	return runs, sc.Err()
}

// readKilled reads the workers killed, one a line: the worker's id and
// when it was killed, in Unix nanoseconds. No path, or no file, is none.
func readKilled(path string) (map[string]time.Time, error) {
	killed := map[string]time.Time{}
	if path == "" {
		return killed, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return killed, nil
	}
	if err != nil {
		return nil, err
	}
	for n, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(fields[len(fields)-1], 10, 64)
		if len(fields) != 2 || err != nil {
			return nil, fmt.Errorf("%s line %d: %q: want a worker id and a time in Unix nanoseconds", path, n+1, line)
		}
		killed[fields[0]] = time.Unix(0, ns)
	}
	return killed, nil
}

// storedResultsOn dials url with the seed nkey (none: no authentication)
// as an admin and reads storedResults.
func storedResultsOn(ctx context.Context, url, nkey string) (map[ledgerKey]time.Time, error) {
	role := bus.Role("")
	if nkey != "" {
		role = bus.RoleAdmin
	}
	conn, err := bus.Dial(ctx, bus.Config{URL: url, NKeySeedFile: nkey, Role: role}, zerolog.Nop())
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return storedResults(ctx, conn.JS)
}

// storedResults reads the whole results stream and returns, for each
// attempt of a ledger call, when its first result was stored (a result
// published again after the results' duplicate window is stored again).
// On a cluster whose node was just killed, a read can stall (the ordered
// consumer's pulls reach a node that lost it): each message is waited for
// at most storedReadWait, and a stalled read starts again on a new
// consumer, until ctx ends.
func storedResults(ctx context.Context, js jetstream.JetStream) (map[ledgerKey]time.Time, error) {
	for {
		stored, err := readStoredResults(ctx, js)
		if err == nil || ctx.Err() != nil {
			return stored, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Second):
		}
	}
}

// storedReadWait bounds the wait for one message of storedResults.
const storedReadWait = 10 * time.Second

func readStoredResults(ctx context.Context, js jetstream.JetStream) (map[ledgerKey]time.Time, error) {
	cons, err := js.OrderedConsumer(ctx, bus.StreamResults, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	next := func() (jetstream.Msg, error) {
		nctx, cancel := context.WithTimeout(ctx, storedReadWait)
		defer cancel()
		return cons.Next(jetstream.FetchContext(nctx))
	}
	stored := map[ledgerKey]time.Time{}
	for left := info.NumPending; left > 0; left-- {
		m, err := next()
		for tries := 0; errors.Is(err, nats.ErrNoResponders) && tries < 100; tries++ {
			// On a cluster, a pull can reach a node before the new
			// consumer is known there.
			time.Sleep(50 * time.Millisecond)
			m, err = next()
		}
		if err != nil {
			return nil, fmt.Errorf("read results (%d left): %w", left, err)
		}
		var res planbus.ToolResult
		if json.Unmarshal(m.Data(), &res) != nil || res.Skill != ledgerSkillName {
			continue
		}
		meta, err := m.Metadata()
		if err != nil {
			continue
		}
		k := ledgerKey{res.PlanID, res.ToolID, res.Attempt}
		if at, ok := stored[k]; !ok || meta.Timestamp.Before(at) {
			stored[k] = meta.Timestamp
		}
	}
	return stored, nil
}

// duplicates are the ledger's runs counted by what they were.
type duplicates struct {
	runs, attempts int
	// retries: first runs of attempts 2 and later, after a failure: the
	// retry policy at work, not a duplicate.
	retries int
	// The runs of an attempt after its first, by cause:
	completed  int // its result was stored before it ran again: a re-run of a completed call
	workerDied int // no result stored yet, and a worker that ran it earlier had been killed
	stillOn    int // no result stored yet, and the workers that ran it live: its ack wait ran out
	// examples describe the first few re-runs; rerunCompleted are the
	// first few attempts that ran again after their result was stored.
	examples       []string
	rerunCompleted []ledgerKey
}

// all is every duplicate side effect.
func (d duplicates) all() int { return d.completed + d.workerDied + d.stillOn }

func (d duplicates) String() string {
	return fmt.Sprintf("%d side effects of %d attempts, %d retries (a new attempt after a failure); "+
		"%d duplicate side effects: %d re-runs of a completed call, %d re-runs after a worker died mid-call, "+
		"%d re-runs while the first run's worker lived (its ack wait ran out)",
		d.runs, d.attempts, d.retries, d.all(), d.completed, d.workerDied, d.stillOn)
}

// countDuplicates sorts each attempt's runs by the time they began and
// counts every run after the first as a duplicate, with its cause: a
// result of the attempt stored before it began (it should not have run),
// else a worker that ran it before and had been killed when it began,
// else none known.
func countDuplicates(runs []ledgerRun, stored map[ledgerKey]time.Time, killed map[string]time.Time) duplicates {
	byKey := map[ledgerKey][]ledgerRun{}
	for _, r := range runs {
		byKey[r.key()] = append(byKey[r.key()], r)
	}
	d := duplicates{runs: len(runs), attempts: len(byKey)}
	keys := make([]ledgerKey, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b ledgerKey) int {
		return byKey[a][0].Began.Compare(byKey[b][0].Began)
	})
	for _, k := range keys {
		rs := byKey[k]
		slices.SortFunc(rs, func(a, b ledgerRun) int { return a.Began.Compare(b.Began) })
		if k.attempt > 1 {
			d.retries++
		}
		for i := 1; i < len(rs); i++ {
			r := rs[i]
			cause := ""
			at, ok := stored[k]
			switch {
			case ok && at.Before(r.Began):
				d.completed++
				if len(d.rerunCompleted) < 5 {
					d.rerunCompleted = append(d.rerunCompleted, k)
				}
				cause = fmt.Sprintf("its result was stored %s before", r.Began.Sub(at).Round(time.Millisecond))
			case slices.ContainsFunc(rs[:i], func(e ledgerRun) bool {
				at, ok := killed[e.WorkerID]
				return ok && at.Before(r.Began)
			}):
				d.workerDied++
				cause = "a worker that ran it before had been killed"
			default:
				d.stillOn++
				cause = "no result stored yet, its workers alive"
			}
			if len(d.examples) < 10 {
				var on []string
				for _, e := range rs[:i+1] {
					on = append(on, fmt.Sprintf("%s at %s", e.WorkerID, e.Began.Format("15:04:05.000")))
				}
				d.examples = append(d.examples, fmt.Sprintf("%s/%s/%d ran again (%s): %s", k.planID, k.toolID, k.attempt, cause, strings.Join(on, ", ")))
			}
		}
	}
	return d
}

// ledgerTool is a tool of the ledger skill in a plan's JSON: a side
// effect, then ms of work; its first failAttempts attempts fail (network)
// and are retried.
func ledgerTool(id string, ms, failAttempts int, deps ...string) string {
	d, _ := json.Marshal(deps)
	if deps == nil {
		d = []byte("[]")
	}
	retry := ""
	if failAttempts > 0 {
		retry = fmt.Sprintf(`,"retryPolicy":{"maxAttempts":%d,"backoffMs":100}`, failAttempts+2)
	}
	return fmt.Sprintf(`{"toolId":%q,"skill":%q,"dependencies":%s,"input":{"ms":%d,"failAttempts":%d}%s}`,
		id, ledgerSkillName, d, ms, failAttempts, retry)
}

// TestCountDuplicates checks the causes the soak gives the ledger's runs.
func TestCountDuplicates(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	run := func(tool string, attempt int, worker string, ms int) ledgerRun {
		return ledgerRun{RequestID: "r", PlanID: "r-1", ToolID: tool, Attempt: attempt, WorkerID: worker, Began: at(ms)}
	}
	key := func(tool string, attempt int) ledgerKey { return ledgerKey{"r-1", tool, attempt} }
	tests := []struct {
		name   string
		runs   []ledgerRun
		stored map[ledgerKey]time.Time
		killed map[string]time.Time
		want   duplicates
	}{
		{"once each", []ledgerRun{run("A", 1, "w1", 0), run("B", 1, "w2", 10)},
			map[ledgerKey]time.Time{key("A", 1): at(200), key("B", 1): at(210)}, nil,
			duplicates{runs: 2, attempts: 2}},
		{"a retry is no duplicate", []ledgerRun{run("A", 1, "w1", 0), run("A", 2, "w1", 400)},
			map[ledgerKey]time.Time{key("A", 1): at(200), key("A", 2): at(600)}, nil,
			duplicates{runs: 2, attempts: 2, retries: 1}},
		{"run again after its result was stored", []ledgerRun{run("A", 1, "w2", 5000), run("A", 1, "w1", 0)},
			map[ledgerKey]time.Time{key("A", 1): at(200)}, nil,
			duplicates{runs: 2, attempts: 1, completed: 1}},
		{"run again after its worker was killed", []ledgerRun{run("A", 1, "w1", 0), run("A", 1, "w2", 2100)},
			map[ledgerKey]time.Time{key("A", 1): at(2300)}, map[string]time.Time{"w1": at(50)},
			duplicates{runs: 2, attempts: 1, workerDied: 1}},
		{"stored before, though its worker was killed", []ledgerRun{run("A", 1, "w1", 0), run("A", 1, "w2", 2100)},
			map[ledgerKey]time.Time{key("A", 1): at(200)}, map[string]time.Time{"w1": at(300)},
			duplicates{runs: 2, attempts: 1, completed: 1}},
		{"its worker killed only after the re-run began", []ledgerRun{run("A", 1, "w1", 0), run("A", 1, "w2", 2100)},
			map[ledgerKey]time.Time{key("A", 1): at(2300)}, map[string]time.Time{"w1": at(9000)},
			duplicates{runs: 2, attempts: 1, stillOn: 1}},
		{"no result stored at all", []ledgerRun{run("A", 1, "w1", 0), run("A", 1, "w2", 2100), run("A", 1, "w3", 4200)},
			nil, map[string]time.Time{"w2": at(2200)},
			duplicates{runs: 3, attempts: 1, stillOn: 1, workerDied: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// String names every count.
			if got, want := countDuplicates(tt.runs, tt.stored, tt.killed).String(), tt.want.String(); got != want {
				t.Errorf("got %s\nwant %s", got, want)
			}
		})
	}
}
