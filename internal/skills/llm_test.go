package skills_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/llm"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/skill/skilltest"
)

// chatServer is an OpenAI-compatible Chat Completions endpoint in the
// test: it hands each request to check and answers with answer, or with
// status and no answer when status is set.
func chatServer(t *testing.T, check func(req map[string]any), answer string, status int, delay time.Duration) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req map[string]any
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		if check != nil {
			check(req)
		}
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		if status != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"error":{"message":"model not found","type":"invalid_request_error"}}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "x", "object": "chat.completion", "created": 1, "model": req["model"],
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": answer}}}})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestLLMSkillAsksTheModelAndReturnsItsAnswer(t *testing.T) {
	var seen map[string]any
	srv := chatServer(t, func(req map[string]any) { seen = req }, `{"city":"Lisbon"}`, 0, 0)
	s := skills.LLM(llm.Endpoint{URL: srv.URL + "/v1", Model: "small"})
	res, err := skilltest.Call(t, s, map[string]any{"system": "Answer in JSON.", "prompt": "Which city?",
		"schema": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}})
	if err != nil {
		t.Fatal(err)
	}
	out := skilltest.Output[skills.LLMOutput](t, res)
	if out.Text != `{"city":"Lisbon"}` || out.Model != "small" {
		t.Errorf("output %+v", out)
	}
	if m, _ := out.JSON.(map[string]any); m["city"] != "Lisbon" {
		t.Errorf("json %v, want the answer decoded", out.JSON)
	}
	msgs, _ := seen["messages"].([]any)
	rf, _ := seen["response_format"].(map[string]any)
	if seen["model"] != "small" || len(msgs) != 2 || rf["type"] != "json_schema" {
		t.Errorf("the request: model %v, %d messages, response_format %v", seen["model"], len(msgs), rf)
	}
}

func TestLLMSkillFailures(t *testing.T) {
	refused := chatServer(t, nil, "", http.StatusNotFound, 0)
	_, err := skilltest.Call(t, skills.LLM(llm.Endpoint{URL: refused.URL + "/v1", Model: "nope"}), map[string]any{"prompt": "hi"})
	if info, _ := skill.ErrorInfo(err); info == nil || info.Category != planbus.CategoryPermanent {
		t.Errorf("a model the API does not have: %v, want a permanent failure", err)
	}
	slow := chatServer(t, nil, "late", 0, time.Minute)
	_, err = skilltest.Call(t, skills.LLM(llm.Endpoint{URL: slow.URL + "/v1", Model: "m"}), map[string]any{"prompt": "hi"}, skilltest.WithTimeout(100*time.Millisecond))
	if info, _ := skill.ErrorInfo(err); info == nil || info.Category != planbus.CategoryTimeout {
		t.Errorf("a model slower than the call's deadline: %v, want a timeout", err)
	}
	notJSON := chatServer(t, nil, "sure! here it is", 0, 0)
	_, err = skilltest.Call(t, skills.LLM(llm.Endpoint{URL: notJSON.URL + "/v1", Model: "m"}), map[string]any{"prompt": "hi", "schema": map[string]any{"type": "object"}})
	if info, _ := skill.ErrorInfo(err); info == nil || info.Code != planbus.CodeOutputInvalid {
		t.Errorf("an answer that is not the JSON asked for: %v, want %s", err, planbus.CodeOutputInvalid)
	}
	_, err = skilltest.Call(t, skills.LLM(llm.Endpoint{URL: notJSON.URL + "/v1"}), map[string]any{"prompt": "hi"})
	if info, _ := skill.ErrorInfo(err); info == nil || info.Category != planbus.CategoryInvalidInput {
		t.Errorf("no model anywhere: %v, want invalid input", err)
	}
}
