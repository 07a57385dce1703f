package cliworker_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/token"
	"github.com/planbus/planbus/schemas"
)

// The messages docs/protocol.md shows are what planbus sends and accepts:
// each is valid against its schema, the call's and the result's
// Nats-Msg-Id is the one planbus derives from the token, and the cancel's
// token has the call's cancelDigest. A change to the protocol that the page
// does not follow fails here.
func TestProtocolDocExamples(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "protocol.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := fences(string(doc))
	var call planbus.ToolCall
	var result planbus.ToolResult
	var cancel planbus.Cancel
	checked := map[string]int{}
	for _, b := range blocks {
		body := b.body
		header, msg, isMsg := strings.Cut(body, "\n\n")
		switch {
		case isMsg && strings.HasPrefix(header, "Nats-Msg-Id: "):
			id := strings.TrimPrefix(header, "Nats-Msg-Id: ")
			var probe map[string]any
			if err := json.Unmarshal([]byte(msg), &probe); err != nil {
				t.Fatalf("a message example is not JSON: %v\n%s", err, msg)
			}
			name, into := schemas.ToolCall, any(&call)
			if _, ok := probe["state"]; ok {
				name, into = schemas.ToolResult, &result
			}
			if err := schemas.Validate(name, []byte(msg)); err != nil {
				t.Errorf("example against %s: %v\n%s", name, err, msg)
			}
			_ = json.Unmarshal([]byte(msg), into)
			var key, tok string
			if name == schemas.ToolCall {
				key, tok = call.IdempotencyKey, call.Token
				if want := planbus.IdempotencyKey(call.PlanID, call.ToolID, call.Attempt); key != want {
					t.Errorf("the call's idempotencyKey is %q, want %q", key, want)
				}
			} else {
				key, tok = planbus.IdempotencyKey(result.PlanID, result.ToolID, result.Attempt), result.Token
			}
			if want := token.MsgID(key, tok); id != want {
				t.Errorf("%s example: Nats-Msg-Id %q, want %q", name, id, want)
			}
			checked[name]++
		case b.lang == "json":
			var probe map[string]json.RawMessage
			if err := json.Unmarshal([]byte(body), &probe); err != nil {
				t.Fatalf("a json block is not a JSON object: %v\n%s", err, body)
			}
			var name string
			switch {
			case probe["cancelToken"] != nil:
				name = schemas.Cancel
				_ = json.Unmarshal([]byte(body), &cancel)
			case probe["kind"] != nil:
				name = schemas.PlanRequest
			case probe["tools"] != nil:
				name = schemas.Plan
			case probe["name"] != nil:
				name = schemas.SkillManifest
			case probe["error"] != nil:
				continue // an external planner's error answer: no schema of its own
			default:
				t.Fatalf("a json block of unknown kind:\n%s", body)
			}
			if err := schemas.Validate(name, []byte(body)); err != nil {
				t.Errorf("example against %s: %v\n%s", name, err, body)
			}
			checked[name]++
		}
	}
	for _, name := range []string{schemas.ToolCall, schemas.ToolResult, schemas.Cancel, schemas.SkillManifest, schemas.PlanRequest, schemas.Plan} {
		if checked[name] == 0 {
			t.Errorf("docs/protocol.md shows no %s example", name)
		}
	}
	if result.Token != call.Token {
		t.Errorf("the result example's token %q is not its call's %q", result.Token, call.Token)
	}
	if got := token.Digest(cancel.Token); got != call.CancelDigest {
		t.Errorf("the cancel example's token has digest %q, the call example's cancelDigest is %q", got, call.CancelDigest)
	}
}

type fence struct{ lang, body string }

// fences returns the fenced code blocks of a Markdown text.
func fences(md string) []fence {
	var out []fence
	var cur *fence
	for _, line := range strings.Split(md, "\n") {
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &fence{lang: strings.TrimPrefix(line, "```")}
		case cur != nil && line == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.body += line + "\n"
		}
	}
	return out
}
