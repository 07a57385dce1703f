package benchcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/planbus/planbus/internal/bench"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/cli"
)

// Flags that cannot make a benchmark are refused with a usage error
// naming them.
func TestBenchRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--runs", "0"}, "--runs"},
		{[]string{"--dispatchers", "0"}, "--dispatchers"},
		{[]string{"--workers", "0"}, "--workers"},
		{[]string{"--floor-samples", "0"}, "--floor-samples"},
		{[]string{"--floor-plans", "0"}, "--floor-plans"},
		{[]string{"--scale", "--only", "chain-10"}, "--scale"},
		{[]string{"--soak", "-1s"}, "--soak"},
		{[]string{"--soak", "1s", "--rate", "0"}, "--rate"},
		{[]string{"--only", "ring-10"}, "ring-10"},
	} {
		o := runBench(t, tc.args...)
		if o.code != cli.ExitUsage || !strings.Contains(o.stderr, tc.want) {
			t.Errorf("bench %v: exit %d, stderr %q; want %d naming %s", tc.args, o.code, o.stderr, cli.ExitUsage, tc.want)
		}
	}
	if o := runBench(t, "component", "nothing"); o.code != cli.ExitUsage {
		t.Errorf("bench component nothing: exit %d, want %d", o.code, cli.ExitUsage)
	}
}

// benchQuick are flags that keep a bench run short: the figures are not
// looked at, only that every instrument reports.
var benchQuick = []string{"--runs", "1", "--floor-samples", "20", "--floor-rounds", "1", "--floor-steps", "10",
	"--floor-calls", "50", "--floor-plans", "20", "--sync", "1s"}

// A bench run prints the bus floor, each workload with CPU per tool and
// conflicts per plan, the ratios to the floor, and a workload the plan
// limit refuses as refused.
func TestBenchInstruments(t *testing.T) {
	o := runBench(t, append([]string{"--only", "chain-10,many-plans-3,fanout-99999"}, benchQuick...)...)
	if o.code != cli.ExitOK {
		t.Fatalf("exit %d; stderr:\n%s", o.code, o.stderr)
	}
	checkBenchTables(t, o.stdout)
	for _, want := range []string{
		"fanout-99999 (100001 tools a plan): refused: plan check: at /tools: maxItems",
		"| many-plans-3 | plans/s vs bus-only tools/s ÷ 5 |",
	} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, o.stdout)
		}
	}
}

// checkBenchTables checks what every bench run of chain-10 and
// many-plans-3 prints.
func checkBenchTables(t *testing.T, stdout string) {
	t.Helper()
	for _, re := range []string{
		`\| JetStream publish\+ack \| [0-9.]+ \| [0-9.]+ \|`,
		`\| KV compare-and-set \| [0-9.]+ \| [0-9.]+ \|`,
		`\| work-queue publish→pull delivery \| [0-9.]+ \| [0-9.]+ \|`,
		`\| bus-only chain, per step \(median of rounds of 10\) \| [0-9.]+ \| \| [0-9.]+ \|`,
		// CPU ms/tool and conflicts/plan measured for planbus.
		`\| chain-10 \| planbus \|[^\n]*\| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|\n`,
		`\| many-plans-3 \| planbus \|[^\n]*\| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|\n`,
		`\| chain-10 \| ms/step vs bus-only chain \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|`,
		`\| chain-10 \| ms/step vs three-trip sum \|`,
		`\| many-plans-3 \| tools/s vs bus-only fan-out \| [0-9]+ \| [0-9]+ \| [0-9.]+ \|`,
	} {
		if !regexp.MustCompile(re).MatchString(stdout) {
			t.Errorf("stdout lacks %s:\n%s", re, stdout)
		}
	}
}

// A short soak samples RSS and ends with a verdict; no speed is asserted.
func TestBenchSoak(t *testing.T) {
	profile := filepath.Join(t.TempDir(), "heap")
	o := runBench(t, "--soak", "5s", "--rate", "20", "--sample", "1s", "--sync", "1s", "--memprofile", profile)
	if o.code != cli.ExitOK {
		t.Fatalf("exit %d; stderr:\n%s", o.code, o.stderr)
	}
	// t, RSS, live heap, submitted, finished, failed.
	rows := regexp.MustCompile(`(?m)^\| [0-9]+s( \(end\))? \| [0-9.]+ \| [0-9.]+ \| [0-9]+ \| [0-9]+ \| 0 \|`).FindAllString(o.stdout, -1)
	if len(rows) < 3 {
		t.Errorf("%d sample rows, want at least 3:\n%s", len(rows), o.stdout)
	}
	if !strings.Contains(o.stdout, "| 100 | 100 | 0 |") || !regexp.MustCompile(`20 plans a second for 5s: RSS .*; 0 plans lost\.`).MatchString(o.stdout) {
		t.Errorf("no final sample with the 100 plans, or no verdict:\n%s", o.stdout)
	}
	if !regexp.MustCompile(`(?m)^-?[0-9.]+ KB of RSS per retained plan: the slope of RSS over plans finished after the warm-up`).MatchString(o.stdout) {
		t.Errorf("no KB of RSS per retained plan:\n%s", o.stdout)
	}
	if !regexp.MustCompile(`; -?[0-9.]+ KB of it live heap`).MatchString(o.stdout) {
		t.Errorf("no KB of live heap per retained plan:\n%s", o.stdout)
	}
	// A heap profile at the warm-up's end and one at the end.
	for _, f := range []string{profile + ".warm-up", profile} {
		if fi, err := os.Stat(f); err != nil || fi.Size() == 0 {
			t.Errorf("heap profile %s: %v", f, err)
		}
	}
}

// With --procs the dispatchers and workers are processes of their own
// (the planner binary run again): their CPU time counts, conflicts are
// gathered from both dispatchers, and a soak samples each one's RSS.
func TestBenchProcs(t *testing.T) {
	bin := buildPlanner(t)
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"bench", "--procs", "--dispatchers", "2", "--workers", "1"}, args...)...)
		cmd.Env = processEnv(t)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("bench %v: %v; stderr:\n%s", args, err, errOut.String())
		}
		if !strings.Contains(errOut.String(), "2 dispatchers, 1 workers as processes") {
			t.Errorf("stderr does not say the components run as processes:\n%s", errOut.String())
		}
		return out.String()
	}
	checkBenchTables(t, run(append([]string{"--only", "chain-10,many-plans-3"}, benchQuick...)...))
	soak := run("--soak", "3s", "--rate", "10", "--sample", "1s", "--sync", "1s")
	for _, want := range []string{"| RSS bench MB | RSS dispatcher-1 MB | RSS dispatcher-2 MB | RSS worker-1 MB | RSS total MB |", "; 0 plans lost."} {
		if !strings.Contains(soak, want) {
			t.Errorf("soak lacks %q:\n%s", want, soak)
		}
	}
}

// Component processes of a --procs bench declare the streams with the
// bench's own retention, partitions and events kept: one that did not
// would change them for the whole run.
func TestComponentSpecsCarryTheBusSettings(t *testing.T) {
	cfg := bus.Config{Retention: 5 * time.Minute, Partitions: 4, KeepEvents: bus.KeepOutcomeEvents}
	specs := componentSpecs("planner", "nats://127.0.0.1:4222", &benchFlags{dispatchers: 1, workers: 2, concurrency: 8}, "warn", cfg)
	if len(specs) != 3 {
		t.Fatalf("%d processes, want 1 dispatcher and 2 workers", len(specs))
	}
	for _, sp := range specs {
		got := map[string]string{}
		for i := 0; i+1 < len(sp.Args); i++ {
			if strings.HasPrefix(sp.Args[i], "--") {
				got[sp.Args[i]] = sp.Args[i+1]
			}
		}
		for flag, want := range map[string]string{"--retention": "5m0s", "--partitions": "4", "--keep-events": "outcomes",
			"--nats-url": "nats://127.0.0.1:4222"} {
			if got[flag] != want {
				t.Errorf("%s: %s %q, want %q (args %v)", sp.Name, flag, got[flag], want, sp.Args)
			}
		}
	}
}

// A workload that fails does not lose the others' measurements: the bench
// goes on to the next, prints every table of what it measured, then a
// line naming the failure, and exits 1. The failing one is a plan within
// the plan limits but larger than the server's largest message (8 MiB),
// so its publish fails.
func TestBenchKeepsWhatItMeasured(t *testing.T) {
	dir := t.TempDir()
	big := bench.Workload{Name: "too-big", MaxConcurrency: 64}
	for i := range 64_000 { // over 158 bytes a tool: over 9.6 MB, whatever the encoding leaves out
		big.Tools = append(big.Tools, bench.Tool{ToolID: fmt.Sprintf("%0128d", i), Dependencies: []string{}})
	}
	for name, w := range map[string]bench.Workload{
		"a-too-big.json": big, // run first: the one after it still runs
		"b-chain.json": {Name: "chain-2", MaxConcurrency: 1, Tools: []bench.Tool{{ToolID: "A", Dependencies: []string{}},
			{ToolID: "B", Dependencies: []string{"A"}}}},
	} {
		doc, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), doc, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o := runBench(t, append([]string{"--workloads", dir}, benchQuick...)...)
	if o.code != cli.ExitFailed {
		t.Fatalf("exit %d, want %d; stderr:\n%s", o.code, cli.ExitFailed, o.stderr)
	}
	for _, re := range []string{
		`\| JetStream publish\+ack \| [0-9.]+ \| [0-9.]+ \|`,
		`\| chain-2 \| planbus \|[^\n]*\| [0-9.]+ \|\n\| chain-2 \| engine \|[^\n]*\| 1\.0 \|\n`,
		`\| chain-2 \| ms/step vs bus-only chain \|`,
		// The failure, after the tables.
		`(?s)\| chain-2 \| ms/step vs three-trip sum \|.*\ntoo-big on planbus: failed: warm-up run: bench: publish planbus\.plans\.[A-Za-z0-9]+: nats: maximum payload exceeded\n$`,
	} {
		if !regexp.MustCompile(re).MatchString(o.stdout) {
			t.Errorf("stdout lacks %s:\n%s", re, o.stdout)
		}
	}
	if strings.Contains(o.stdout, "| too-big |") {
		t.Errorf("the failed workload has a row:\n%s", o.stdout)
	}
	if !strings.Contains(o.stderr, "planner bench: 1 failed") {
		t.Errorf("stderr does not count the failure:\n%s", o.stderr)
	}
}

// A failed bus floor leaves the ratios out and is named after the
// workloads' table; a workload whose engine floor failed keeps its
// planbus row, without the ratio to the engine.
func TestBenchOutcomeWithFailures(t *testing.T) {
	r := &bench.Result{Workload: "chain-2", Runner: "planbus", Tools: 2, Instances: 1, Steps: 2,
		Makespans: []time.Duration{3 * time.Millisecond}, Latencies: []time.Duration{3 * time.Millisecond}}
	o := benchOutcome{system: []*bench.Result{r}, engine: []*bench.Result{nil},
		failed: []string{"bus floor: failed: boom", "chain-2 on the engine floor: failed: bang"}}
	var out strings.Builder
	o.report(&out)
	want := "| workload | runner | makespan median (min–max) | ms/critical step | tools/s | plans/s | latency p50 / p99 | CPU ms/tool | conflicts/plan | × engine floor |\n" +
		"|---|---|---|---|---|---|---|---|---|---|\n" +
		"| chain-2 | planbus | 3.00ms (3.00ms–3.00ms) | 1.500 | 667 |  |  |  |  |  |\n" +
		"\nbus floor: failed: boom\nchain-2 on the engine floor: failed: bang\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
}
