package worker_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/wire"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

// A typed skill served by a real worker: the worker advertises its derived
// schemas, refuses input its input schema refuses before fn runs, and fails
// an attempt whose output its output schema refuses with OUTPUT_INVALID,
// never retried, naming the place.
func TestFuncSkillOnAWorker(t *testing.T) {
	e := newEnv(t)
	type in struct {
		Name  string `json:"name"`
		Delta int    `json:"delta,omitempty"`
	}
	type out struct {
		Name  string `json:"name"`
		Score int    `json:"score"`
	}
	var runs atomic.Int64
	score := skill.Func("score", "Scores a name.", func(_ context.Context, v in) (out, error) {
		runs.Add(1)
		return out{Name: v.Name, Score: len(v.Name) + v.Delta}, nil
	})
	// The derived output schema says score is an integer; the skill
	// promises more, and the worker holds it to that.
	score.Manifest.OutputSchema = json.RawMessage(`{"type":"object","required":["name","score"],"additionalProperties":false,
		"properties":{"name":{"type":"string"},"score":{"type":"integer","minimum":0}}}`)
	e.startWorker(worker.Config{Skills: []skill.Skill{score}})

	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	kv, err := e.conn.JS.KeyValue(ctx, bus.BucketSkills)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := kv.Get(ctx, "score")
	if err != nil {
		t.Fatalf("score is not advertised: %v", err)
	}
	var m skill.Manifest
	if err := json.Unmarshal(entry.Value(), &m); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(m.InputSchema), `"required":["name"]`) || !strings.Contains(string(m.OutputSchema), `"minimum":0`) {
		t.Errorf("advertised manifest %s, want the derived input schema and the output schema", entry.Value())
	}

	e.publish(newCall("good", "t", "score", `{"name":"ann","delta":1}`))
	if res, _ := e.result("good"); res.State != planbus.ToolSucceeded || string(res.Output) != `{"name":"ann","score":4}` {
		t.Errorf("result %s %s %+v, want succeeded with the score", res.State, res.Output, res.Error)
	}

	e.publish(newCall("negative", "t", "score", `{"name":"ann","delta":-10}`))
	res, msg := e.result("negative")
	if _, err := wire.DecodeResult(msg.Data()); err != nil {
		t.Fatalf("the dispatcher would drop the result: %v\n%s", err, msg.Data())
	}
	if res.State != planbus.ToolFailed || errorCode(res) != planbus.CodeOutputInvalid || res.Error.Category != planbus.CategoryPermanent {
		t.Errorf("result %s %+v, want failed %s (permanent)", res.State, res.Error, planbus.CodeOutputInvalid)
	}
	if res.Error != nil && !strings.Contains(res.Error.Message, "skill score: output at /score") {
		t.Errorf("message %q does not name the output's bad member /score", res.Error.Message)
	}
	if res.Output != nil {
		t.Errorf("output %s reported with the refusal, want none", res.Output)
	}

	e.publish(newCall("no-name", "t", "score", `{"delta":1}`))
	if res, _ := e.result("no-name"); res.State != planbus.ToolFailed || errorCode(res) != planbus.CodeInvalidInput {
		t.Errorf("result %s %+v, want failed INVALID_INPUT", res.State, res.Error)
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("fn ran %d times, want 2 (not for the input without a name)", n)
	}
}
