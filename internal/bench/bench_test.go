package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeWorkload(t *testing.T, dir, name, doc string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadConvertsWorkloadsToPlans(t *testing.T) {
	dir := t.TempDir()
	writeWorkload(t, dir, "b.json", `{"name":"diamond","maxConcurrency":4,"sleepMs":0,"tools":[
		{"toolId":"A","dependencies":[]},{"toolId":"B","dependencies":["A"],"sleepMs":30},
		{"toolId":"C","dependencies":["A"],"sleepMs":10},{"toolId":"D","dependencies":["B","C"]}]}`)
	writeWorkload(t, dir, "a.json", `{"name":"many","instances":3,"tools":[{"toolId":"x","dependencies":[]}]}`)
	ws, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 || ws[0].Name != "many" || ws[0].Instances != 3 || ws[1].Instances != 1 {
		t.Fatalf("loaded %+v", ws)
	}
	d := ws[1]
	if steps, sleep := d.CriticalPath(); steps != 3 || sleep != 30 {
		t.Errorf("critical path %d steps, %d ms; want 3 and 30", steps, sleep)
	}
	p, err := d.Plan("p1")
	if err != nil {
		t.Fatal(err)
	}
	if p.MaxConcurrency != 4 || p.Tools[0].Skill != "echo" || p.Tools[1].Skill != "sleep" || string(p.Tools[1].Input) != `{"ms":30}` {
		t.Errorf("plan %+v", p.Tools)
	}
}

func TestLoadNamesABadFile(t *testing.T) {
	dir := t.TempDir()
	writeWorkload(t, dir, "bad.json", `{"name":`)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "bad.json") {
		t.Errorf("err = %v, want one naming bad.json", err)
	}
	if _, err := Load(t.TempDir()); err == nil {
		t.Error("an empty directory loaded")
	}
}

func TestMeasureOnTheFloor(t *testing.T) {
	dir := t.TempDir()
	writeWorkload(t, dir, "w.json", `{"name":"w","instances":2,"maxConcurrency":2,"tools":[
		{"toolId":"A","dependencies":[]},{"toolId":"B","dependencies":["A"]}]}`)
	ws, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var conflicts int64
	counter := func(context.Context) (int64, error) { conflicts += 3; return conflicts, nil }
	r, err := Measure(ctx, ws[0], "floor", FloorRunner, Options{Runs: 3, CPU: SelfCPU, Conflicts: counter, Decoded: true})
	if err != nil {
		t.Fatal(err)
	}
	// The counter is read before the measured runs and after them.
	if !r.HasCPU || r.CPU < 0 || !r.HasConflicts || r.Conflicts != 3 || r.ConflictsPerPlan() != 0.5 {
		t.Errorf("CPU %v (%v), conflicts %d (%v), %v a plan; want CPU measured, 3 conflicts, 0.5 a plan",
			r.CPU, r.HasCPU, r.Conflicts, r.HasConflicts, r.ConflictsPerPlan())
	}
	if len(r.Makespans) != 3 || len(r.Latencies) != 6 || r.Steps != 2 || r.Tools != 2 || r.Instances != 2 {
		t.Fatalf("result %+v", r)
	}
	if r.Min() > r.Median() || r.Median() > r.Max() || r.Percentile(50) > r.Percentile(99) {
		t.Errorf("order: min %v median %v max %v p50 %v p99 %v", r.Min(), r.Median(), r.Max(), r.Percentile(50), r.Percentile(99))
	}
	var out strings.Builder
	Report(&out, []*Result{r}, []*Result{r})
	if !strings.Contains(out.String(), "| w | floor |") || !strings.Contains(out.String(), "| 1.0 |") {
		t.Errorf("report:\n%s", out.String())
	}
}

// The built-in workloads are the shared files, each a valid plan.
func TestBuiltinWorkloads(t *testing.T) {
	ws, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range ws {
		names = append(names, w.Name)
		if _, err := w.Plan("p"); err != nil {
			t.Errorf("%s: %v", w.Name, err)
		}
	}
	want := []string{"chain-100", "diamond-sleep", "fanout-1000", "layered-10x20", "many-plans", "random-500"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("built-in workloads %v, want %v", names, want)
	}
}

// The bench reads an execution result's end, the same whichever decoder
// reads it.
func TestEndedReadsTheEnd(t *testing.T) {
	for _, doc := range []string{
		`{"planId":"p","state":"failed","success":false,"error":{"code":"X","message":"m","category":"permanent"},"finishedAt":"2026-11-26T12:00:00.5Z","tools":[{"toolId":"a"}]}`,
		`{"planId":"p","planId":"p","state":"failed","success":false,"error":{"code":"X","message":"m","category":"permanent"},"finishedAt":"2026-11-26T12:00:00.5Z"}`,
	} {
		r, err := ended([]byte(doc))
		if err != nil || r.State != "failed" || r.Success || r.Error == nil || r.Error.Code != "X" ||
			!r.FinishedAt.Equal(time.Date(2026, 11, 26, 12, 0, 0, 5e8, time.UTC)) {
			t.Errorf("%s: %+v, %v", doc, r, err)
		}
	}
	if r, err := ended([]byte(`{"state":"succeeded","success":true}`)); err != nil || !r.Success {
		t.Errorf("success: %+v, %v", r, err)
	}
	if _, err := ended([]byte(`{"state":`)); err == nil {
		t.Error("a broken result was read")
	}
}
