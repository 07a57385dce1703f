package planner_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/planner"
	"github.com/planbus/planbus/skill"
)

// onceBroken is a skill that fails (for good) on its first call and
// succeeds after: a dependency that was down and is back.
func onceBroken(name string) skill.Skill {
	var calls atomic.Int64
	return skill.Skill{Manifest: planbus.SkillManifest{Name: name}, Handler: skill.HandlerFunc(
		func(_ context.Context, call *skill.Call) (skill.Result, error) {
			if calls.Add(1) == 1 {
				return skill.Result{}, skill.Permanent(planbus.CodeToolFailed, "down")
			}
			return skill.Result{Output: call.Input}, nil
		})}
}

// planner rerun ID --failed-only: only the tools that did not succeed run
// again, and the inputs that referred to the others take their outputs;
// a whole rerun runs everything again; a rerun of a plan that succeeded
// with failed-only has nothing to run.
func TestRerunFailedOnlyKeepsWhatSucceeded(t *testing.T) {
	cnt := newCounter()
	h := start(t, planner.Config{}, append(simulated(t), cnt.skill("count"), onceBroken("publish")))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const first = `{"requestId":"release","kind":"plan","plan":{"description":"release 1.4","tools":[
		{"toolId":"build","skill":"count","input":{"version":"1.4"}},
		{"toolId":"publish","skill":"publish","dependencies":["build"],"input":{"artifact":{"$ref":"build#/input/version"}}},
		{"toolId":"announce","skill":"count","dependencies":["publish","build"],"input":{"what":{"$ref":"publish#/artifact"},"built":{"$ref":"build#/tool"}}}]}}`
	if out, _ := h.request(first); out.Success {
		t.Fatalf("the first run succeeded; want publish to fail")
	}
	acc, err := h.c.Rerun(ctx, "release", client.RerunOptions{FailedOnly: true, RequestID: "release-again"})
	if err != nil {
		t.Fatal(err)
	}
	out := h.await(acc.RequestID)
	if !out.Success {
		t.Fatalf("the rerun %s ended %s: %+v", acc.RequestID, out.Status, out.Execution)
	}
	var ran []string
	outputs := map[string]string{}
	for _, tool := range out.Execution.Tools {
		ran = append(ran, tool.ToolID)
		outputs[tool.ToolID] = string(tool.Output)
	}
	if strings.Join(ran, ",") != "publish,announce" {
		t.Errorf("the rerun ran %v, want publish and announce only", ran)
	}
	if outputs["publish"] != `{"artifact":"1.4"}` || !strings.Contains(outputs["announce"], `"built":"build"`) || !strings.Contains(outputs["announce"], `"what":"1.4"`) {
		t.Errorf("outputs %v: want build's output inlined where it was referred to", outputs)
	}
	if n := cnt.of("release")["build"] + cnt.of("release-again")["build"]; n != 1 {
		t.Errorf("build ran %d times, want once", n)
	}
	// The rerun says what it runs again.
	requests, err := h.conn.JS.Stream(ctx, bus.StreamRequests)
	if err != nil {
		t.Fatal(err)
	}
	m, err := requests.GetLastMsgForSubject(ctx, bus.RequestSubject("release-again"))
	if err != nil {
		t.Fatal(err)
	}
	var accepted struct {
		Metadata map[string]any `json:"metadata"`
	}
	if err := json.Unmarshal(m.Data, &accepted); err != nil || accepted.Metadata[client.RerunOf] != "release" || accepted.Metadata["rerunFailedOnly"] != true {
		t.Errorf("the rerun's metadata %v (%v): want rerunOf release, rerunFailedOnly", accepted.Metadata, err)
	}

	// A whole rerun runs every tool again.
	whole, err := h.c.Rerun(ctx, "release", client.RerunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out := h.await(whole.RequestID); !out.Success || len(out.Execution.Tools) != 3 {
		t.Fatalf("the whole rerun: %s with %d tools", out.Status, len(out.Execution.Tools))
	}
	if cnt.of(whole.RequestID)["build"] != 1 {
		t.Errorf("the whole rerun did not run build")
	}

	// A plan whose first tool failed: the rerun of what did not succeed is
	// the whole plan (its first tool has no dependencies).
	if out, _ := h.request(`{"requestId":"early","kind":"plan","plan":{"tools":[
		{"toolId":"publish","skill":"fail","input":{"category":"permanent"}},
		{"toolId":"announce","skill":"count","dependencies":["publish"]}]}}`); out.Success {
		t.Fatal("a plan whose first tool fails succeeded")
	}
	early, err := h.c.Rerun(ctx, "early", client.RerunOptions{FailedOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if out := h.await(early.RequestID); len(out.Execution.Tools) != 2 || out.Execution.Tools[0].ToolID != "publish" {
		t.Errorf("the rerun of early ran %+v, want publish and announce", out.Execution)
	}

	// Nothing failed in the rerun: failed-only has nothing to run.
	if _, err := h.c.Rerun(ctx, "release-again", client.RerunOptions{FailedOnly: true}); err == nil || !strings.Contains(err.Error(), "nothing to run again") {
		t.Errorf("failed-only rerun of a plan that succeeded: %v", err)
	}
	if _, err := h.c.Rerun(ctx, "no-such", client.RerunOptions{}); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("rerun of an unknown id: %v, want ErrNotFound", err)
	}
}
