package planner_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/planner"
)

// chatRequest is what the tests read of a Chat Completions request.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	ResponseFormat struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Name   string         `json:"name"`
			Schema map[string]any `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

// fakeLLM is an OpenAI-compatible Chat Completions server in the test:
// it records every request and answers each with the next of answers.
type fakeLLM struct {
	t       *testing.T
	mu      sync.Mutex
	calls   []chatRequest
	auth    []string
	answers []string
	delay   time.Duration
}

func (f *fakeLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		http.Error(w, "not found: "+r.Method+" "+r.URL.Path, http.StatusNotFound)
		return
	}
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.calls = append(f.calls, req)
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	n := len(f.calls)
	f.mu.Unlock()
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-r.Context().Done():
			return
		}
	}
	answer := f.answers[min(n, len(f.answers))-1]
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-test", "object": "chat.completion", "created": 1, "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": answer}}},
	})
}

func (f *fakeLLM) requests() []chatRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]chatRequest(nil), f.calls...)
}

// A request of kind llm is planned by the model behind --llm-url: the
// request it gets names the model and carries the goal, the healthy
// skills with their manifests and the plan schema, as text and as the
// response format; its first answer, not a valid plan, goes back once with
// what is wrong, and the repaired plan runs.
func TestLLMPlansARequestAndRepairsAnInvalidAnswer(t *testing.T) {
	llm := &fakeLLM{t: t, answers: []string{
		// A dependency on a tool that is not there.
		`{"tools":[{"toolId":"greet","skill":"echo","input":{"hello":"Lisbon"},"dependencies":["nowhere"]}]}`,
		`{"tools":[{"toolId":"greet","skill":"echo","input":{"hello":"Lisbon"}},
		  {"toolId":"again","skill":"echo","dependencies":["greet"],"input":{"said":{"$ref":"greet#/hello"}}}]}`,
	}}
	srv := httptest.NewServer(llm)
	defer srv.Close()
	h := start(t, planner.Config{LLM: planner.LLMConfig{URL: srv.URL + "/v1", Model: "test-model", APIKey: "k-123"}}, simulated(t))
	out, _ := h.request(`{"kind":"llm","sessionId":"llm-1","llm":{"goal":"say hello to Lisbon twice"}}`)
	if out.Status != planbus.StatusSucceeded || out.Execution == nil || len(out.Execution.Tools) != 2 {
		t.Fatalf("outcome %s (%+v), want the repaired plan of two tools run", out.Status, out.Error)
	}
	calls := llm.requests()
	if len(calls) != 2 {
		t.Fatalf("%d calls to the model, want 2 (the answer, its repair)", len(calls))
	}
	first := calls[0]
	if first.Model != "test-model" {
		t.Errorf("model %q, want test-model", first.Model)
	}
	if llm.auth[0] != "Bearer k-123" {
		t.Errorf("Authorization %q, want the API key as a bearer token", llm.auth[0])
	}
	if len(first.Messages) != 2 || first.Messages[0].Role != "system" || first.Messages[1].Role != "user" {
		t.Fatalf("messages %+v: want system then user", first.Messages)
	}
	sys, user := first.Messages[0].Content, first.Messages[1].Content
	if !strings.Contains(sys, `"tools"`) || !strings.Contains(sys, `"toolId"`) {
		t.Errorf("the system message does not give the plan schema: %.300s", sys)
	}
	for _, want := range []string{"say hello to Lisbon twice", `"name": "echo"`, `"name": "sleep"`, `"inputSchema"`} {
		if !strings.Contains(user, want) {
			t.Errorf("the user message lacks %s: %.600s", want, user)
		}
	}
	rf := first.ResponseFormat
	props, _ := rf.JSONSchema.Schema["properties"].(map[string]any)
	if rf.Type != "json_schema" || rf.JSONSchema.Name != "plan" || props["tools"] == nil {
		t.Errorf("response_format %s %q with properties %v: want json_schema, the plan schema", rf.Type, rf.JSONSchema.Name, props)
	}
	if strings.Contains(mustJSON(t, rf.JSONSchema.Schema), "common.schema.json") {
		t.Error("the response format's schema refers to another document: it must be self-contained")
	}
	repair := calls[1].Messages
	if len(repair) != 4 || repair[2].Role != "assistant" || repair[3].Role != "user" ||
		!strings.Contains(repair[3].Content, "not valid") || !strings.Contains(repair[3].Content, "nowhere") {
		t.Errorf("the repair call's messages %+v: want the answer back and what is wrong with it", repair)
	}
}

// The model's skills leave out those disabled in the session, as the
// replan loop requires: after a tool of skill fail fails, the replan's
// prompt does not offer it.
func TestLLMReplanLeavesOutDisabledSkills(t *testing.T) {
	llm := &fakeLLM{t: t, answers: []string{
		`{"tools":[{"toolId":"try","skill":"fail","input":{"category":"permanent"}}]}`,
		`{"tools":[{"toolId":"ok","skill":"echo","input":{}}]}`,
	}}
	srv := httptest.NewServer(llm)
	defer srv.Close()
	h := start(t, planner.Config{LLM: planner.LLMConfig{URL: srv.URL + "/v1", Model: "m"}}, simulated(t))
	out, _ := h.request(`{"kind":"llm","sessionId":"llm-2","maxAttempts":2,"llm":{"goal":"anything that works"}}`)
	if out.Status != planbus.StatusSucceeded || out.Attempts != 2 {
		t.Fatalf("outcome %s after %d attempts, want success on the replan", out.Status, out.Attempts)
	}
	calls := llm.requests()
	if len(calls) != 2 || !strings.Contains(calls[0].Messages[1].Content, `"name": "fail"`) || strings.Contains(calls[1].Messages[1].Content, `"name": "fail"`) {
		t.Fatalf("%d calls; the replan must not offer the skill that failed", len(calls))
	}
	replan := calls[1].Messages[1].Content
	if !strings.Contains(replan, `"lastPlan"`) || !strings.Contains(replan, `"toolId": "try"`) || !strings.Contains(replan, `"state": "failed"`) {
		t.Errorf("the replan's prompt does not say how the last plan ended: %.800s", replan)
	}
	if llm.auth[0] != "" {
		t.Errorf("Authorization %q sent with no API key configured", llm.auth[0])
	}
}

// A model slower than the planner's LLM budget fails each attempt with
// the budget's error, and the loop ends in its fallback.
func TestLLMSlowerThanItsBudgetFallsBack(t *testing.T) {
	llm := &fakeLLM{t: t, delay: time.Minute, answers: []string{`{"tools":[]}`}}
	srv := httptest.NewServer(llm)
	defer srv.Close()
	h := start(t, planner.Config{LLM: planner.LLMConfig{URL: srv.URL + "/v1", Model: "m", Budget: 200 * time.Millisecond}}, simulated(t))
	out, _ := h.request(`{"kind":"llm","sessionId":"llm-3","maxAttempts":2,"llm":{"goal":"too slow"}}`)
	if out.Status != planbus.StatusFallback || out.Error == nil || out.Error.Code != planbus.CodeGenerationTimeout {
		t.Fatalf("outcome %s, error %+v: want the fallback after %s", out.Status, out.Error, planbus.CodeGenerationTimeout)
	}
	if n := len(llm.requests()); n != 2 {
		t.Errorf("%d calls, want one per attempt (2)", n)
	}
}

// A planner started without --llm-url ends a request of kind llm at once,
// saying how to give it a model.
func TestLLMRequestWithoutAModel(t *testing.T) {
	h := start(t, planner.Config{}, simulated(t))
	out, _ := h.request(`{"kind":"llm","sessionId":"llm-4","llm":{"goal":"x"}}`)
	if out.Status != planbus.StatusFallback || out.Error == nil || !strings.Contains(out.Error.Message, "--llm-url") {
		t.Fatalf("outcome %s, error %+v: want the fallback naming --llm-url", out.Status, out.Error)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
