package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bench"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

// footprint is what the finished plans left in one stream: its messages
// and subjects, those naming a plan (per plan) and the others.
type footprint struct {
	stream                 string
	storage                jetstream.StorageType
	msgs, deleted, bytes   uint64
	planSubjects, planMsgs int // of subjects naming one of the plans
	otherSubjects          int
	dupWindow, maxAge      time.Duration
	examples               []string
}

// planFootprint runs n of the soak's plans (5-tool diamonds) through a
// node and reads, stream by stream, what they left: the subjects that
// name a plan, and their messages. It is what each retained plan
// costs the server's subject indexes and de-duplication windows.
//
// With viaPlanner, the plans go through the planner as requests of kind
// plan (client.RunPlan, one at a time), as planner serve's users send
// them: each also leaves its request, its outcome and its replan state.
func planFootprint(t *testing.T, n int, viaPlanner bool) []footprint {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nd, err := node.Start(ctx, node.Config{
		Bus:     bus.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir()},
		Workers: 1,
		Worker:  worker.Config{Skills: []skill.Skill{skills.Echo(), skills.Sleep()}, Concurrency: 16},
	}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer nd.Stop()
	conn, err := nd.Dial(ctx, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sys, err := bench.NewSystem(conn)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	w, err := bench.Generate("many-plans-1")
	if err != nil {
		t.Fatal(err)
	}
	var in []bench.Input
	ids := map[string]bool{}
	for range n {
		id := nuid.Next()
		p, err := w.Plan(id)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, bench.Input{ID: id, Doc: doc})
		ids[id] = true
	}
	if viaPlanner {
		c, err := client.New(conn.NC)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range in {
			o, err := c.RunPlan(ctx, p.Doc, nil)
			if err != nil || o.Execution == nil || !o.Execution.Success {
				t.Fatalf("plan %s: %+v, %v", p.ID, o, err)
			}
			ids[o.RequestID], ids[o.Execution.PlanID] = true, true
		}
	} else if _, _, err := sys.Run(ctx, in); err != nil {
		t.Fatal(err)
	}
	// Let the dispatcher's and planner's last writes land.
	time.Sleep(time.Second)
	var out []footprint
	for name := range conn.JS.StreamNames(ctx).Name() {
		st, err := conn.JS.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(">"))
		if err != nil {
			t.Fatal(err)
		}
		f := footprint{stream: name, storage: info.Config.Storage, msgs: info.State.Msgs, bytes: info.State.Bytes, deleted: uint64(info.State.NumDeleted),
			dupWindow: info.Config.Duplicates, maxAge: info.Config.MaxAge}
		for subj, c := range info.State.Subjects {
			named := false
			for _, tok := range strings.FieldsFunc(subj, func(r rune) bool { return r == '.' }) {
				if ids[tok] {
					named = true
					break
				}
			}
			if named {
				f.planSubjects++
				f.planMsgs += int(c)
				if len(f.examples) < 12 {
					f.examples = append(f.examples, fmt.Sprintf("%s ×%d", subj, c))
				}
			} else {
				f.otherSubjects++
			}
		}
		sort.Strings(f.examples)
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].stream < out[j].stream })
	return out
}

// TestPlanFootprint logs what each finished plan leaves in every stream
// and bucket (docs/benchmarks.md, "Memory per retained plan"); run with
// -v to read it.
func TestPlanFootprint(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node")
	}
	const n = 20
	for _, viaPlanner := range []bool{false, true} {
		fs := planFootprint(t, n, viaPlanner)
		how := "submitted to the dispatchers as the soak does"
		if viaPlanner {
			how = "sent to the planner as requests of kind plan"
		}
		logFootprint(t, n, how, fs)
		// Each unique subject a plan keeps in a file stream costs the
		// server's subject index ~100 bytes of heap for the retention
		// (docs/benchmarks.md): a new one should be a decision.
		kept, want := 0, 5
		if viaPlanner {
			want = 8
		}
		for _, f := range fs {
			if f.storage == jetstream.FileStorage {
				kept += f.planSubjects
			}
		}
		if kept > want*n {
			t.Errorf("%s: %.1f unique subjects a plan kept in file streams, want at most %d", how, float64(kept)/float64(n), want)
		}
	}
}

func logFootprint(t *testing.T, n int, how string, fs []footprint) {
	t.Logf("%d plans (5-tool diamonds), %s:", n, how)
	t.Logf("%-24s %-7s %6s %8s %10s %13s %9s %8s %s", "stream", "storage", "msgs", "deleted", "bytes/plan", "subjects/plan", "msgs/plan", "dedup", "examples")
	for _, f := range fs {
		t.Logf("%-24s %-7s %6d %8d %10.0f %13.1f %9.1f %8s %s", f.stream, f.storage, f.msgs, f.deleted,
			float64(f.bytes)/float64(n), float64(f.planSubjects)/float64(n), float64(f.planMsgs)/float64(n), f.dupWindow, strings.Join(f.examples[:min(3, len(f.examples))], ", "))
	}
}
