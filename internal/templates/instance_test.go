package templates

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/planbus/planbus/internal/plan"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

// starterVars are sample requests' variables for each starter plan.
var starterVars = map[string]map[string]string{
	"git_feature_branch":  {"input": "create a feature branch called feature/login", "branch": "feature/login"},
	"git_merge_pr":        {"input": "merge feature/login into main", "branch": "feature/login"},
	"docker_build_deploy": {"input": "docker build the image myapp:dev", "image": "myapp:dev"},
	"bugfix_workflow": {"input": "fix the bug in TestLogin", "test": "TestLogin", "pkg": "./internal/auth",
		"patch": "--- a/internal/auth/login.go\n+++ b/internal/auth/login.go\n@@ -1 +1 @@\n-package auth\n+package auth // fixed\n"},
	"file_backup_restore": {"input": "back up data to archive/2024", "source": "data", "dest": "archive/2024"},
	"api_integration":     {"input": "connect to the api at https://api.example.com/v1/items", "baseUrl": "https://api.example.com", "endpoint": "/v1/items", "authorization": "Bearer abc123"},
	"codegen_module":      {"input": "create a package called billing", "name": "billing", "summary": "computes invoices"},
	"refactor_safe":       {"input": "refactor with the rule 'a[b:len(a)] -> a[b:]'", "rule": "a[b:len(a)] -> a[b:]"},
	"dependency_update":   {"input": "update dependencies"},
	"log_investigation":   {"input": "check the logs of nginx", "unit": "nginx"},
}

func TestToPlanStarterGolden(t *testing.T) {
	l := starter(t)
	for _, tmpl := range l.Plans {
		t.Run(tmpl.ID, func(t *testing.T) {
			p, err := ToPlan(tmpl, starterVars[tmpl.ID])
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.MarshalIndent(p, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("toplan", tmpl.ID+".json"), append(b, '\n'))

			// What ToPlan wrote decodes again to the same plan, and every
			// tool's metadata is readable by the dispatcher.
			again, err := plan.Decode(b)
			if err != nil {
				t.Fatalf("the plan does not decode again: %v", err)
			}
			if len(again.Tools) != len(tmpl.Steps) {
				t.Errorf("%d tools for %d steps", len(again.Tools), len(tmpl.Steps))
			}
			for i, tool := range p.Tools {
				m, err := ParseToolMeta(tool.Metadata)
				if err != nil || m == nil {
					t.Fatalf("tool %s: metadata %v, %v", tool.ToolID, m, err)
				}
				if m.Template.ID != tmpl.ID || m.Template.Step != tool.ToolID || m.Template.Index != i+1 || m.Template.Of != len(p.Tools) {
					t.Errorf("tool %s: template %+v", tool.ToolID, m.Template)
				}
				if tool.RetryPolicy.MaxAttempts != m.OnFail.Attempts() {
					t.Errorf("tool %s: maxAttempts %d, onFail %+v", tool.ToolID, tool.RetryPolicy.MaxAttempts, m.OnFail)
				}
			}
		})
	}
}

func TestToPlanShape(t *testing.T) {
	l := mustDecode(t, lib(`{"id":"p","name":"P","version":"3","timeoutMs":5000,
		"vars":{"who":{"default":"world","pattern":"[a-z]+"}},
		"steps":[
			{"id":"a","name":"Greet {who}","skill":"echo","input":{"text":"hello {who}","{who}":"{{literal}}"},"verify":{"type":"contains","path":"/text","value":"{who}"}},
			{"id":"b","skill":"echo","after":[],"onFail":"skip"},
			{"id":"c","skill":"echo","after":["a","b"],"input":{"x":{"$ref":"a#/text"}},"onFail":{"retries":1,"then":"fallback","step":"c2"},"timeoutMs":700},
			{"id":"d","skill":"echo","onFail":{"then":"fallback","plan":"q"}}
		],
		"fallbacks":[{"id":"c2","skill":"sleep","input":{"ms":1},"onFail":"skip"}]}`,
		`{"id":"q","name":"Q","steps":[{"id":"s","skill":"echo"}]}`))
	tmpl, _ := l.Template("p")
	p, err := ToPlan(tmpl, map[string]string{"who": "bob"})
	if err != nil {
		t.Fatal(err)
	}
	if p.TimeoutMs != 5000 || p.Description != "P" || p.PlanID != "" {
		t.Errorf("plan: timeout %d description %q id %q", p.TimeoutMs, p.Description, p.PlanID)
	}
	type shape struct {
		ID       string
		Deps     []string
		Required bool
		Attempts int
		Timeout  int64
		Defaults bool // timeoutMs left to the skill's default
	}
	var got []shape
	for _, tool := range p.Tools {
		to, _ := tool.Defaults()
		got = append(got, shape{tool.ToolID, tool.Dependencies, tool.Required, tool.RetryPolicy.MaxAttempts, tool.TimeoutMs, to})
	}
	want := []shape{
		{"a", []string{}, true, 3, 30000, true},
		{"b", []string{}, false, 1, 30000, true},
		{"c", []string{"a", "b"}, false, 2, 700, false}, // its fallback ends in skip
		{"d", []string{"c"}, true, 1, 30000, true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if s := string(p.Tools[0].Input); s != `{"bob":"{literal}","text":"hello bob"}` {
		t.Errorf("input a = %s", s)
	}
	if p.Tools[0].Description != "Step 1/4: Greet bob" {
		t.Errorf("description a = %q", p.Tools[0].Description)
	}
	if ok, why := p.Tools[0].Verify.Check(json.RawMessage(`{"text":"hello bob"}`)); !ok {
		t.Errorf("a's gate was not filled in: %s", why)
	}
	if ok, _ := p.Tools[0].Verify.Check(json.RawMessage(`{"text":"hello {who}"}`)); ok {
		t.Error("a's gate still holds its placeholder")
	}
	if p.Tools[1].Verify != nil || p.Tools[2].Fallback.Verify != nil {
		t.Errorf("steps without a gate got one: %v, %v", p.Tools[1].Verify, p.Tools[2].Fallback.Verify)
	}
	mc, _ := ParseToolMeta(p.Tools[2].Metadata)
	if mc.Fallback == nil || mc.Fallback.Step != "c2" || mc.Fallback.OnFail.Then != ActionSkip {
		t.Errorf("c's fallback = %+v", mc.Fallback)
	}
	if fb := p.Tools[2].Fallback; fb == nil || fb.Skill != "sleep" || string(fb.Input) != `{"ms":1}` {
		t.Errorf("c's plan fallback = %+v", fb)
	}
	var meta struct {
		Template PlanMeta `json:"template"`
	}
	if err := json.Unmarshal(p.Metadata, &meta); err != nil {
		t.Fatal(err)
	}
	if want := (PlanMeta{ID: "p", Version: "3", Name: "P", Steps: 4, Staleness: Staleness{MaxTurns: 10}}); !cmp.Equal(meta.Template, want) {
		t.Errorf("plan metadata %+v, want %+v", meta.Template, want)
	}
	if fb, ok := FallbackPlan(p, []string{"a", "d"}); !ok || fb != "q" {
		t.Errorf("FallbackPlan = %q, %v", fb, ok)
	}
	if fb, ok := FallbackPlan(p, []string{"a", "c"}); ok {
		t.Errorf("FallbackPlan without a plan fallback = %q", fb)
	}
}

func TestPlanTimeoutDefault(t *testing.T) {
	l := mustDecode(t, lib(
		`{"id":"short","name":"S","steps":[{"id":"s","skill":"echo","timeoutMs":100,"onFail":"abort"}]}`,
		`{"id":"long","name":"L","steps":[{"id":"s","skill":"echo","timeoutMs":100000,"onFail":{"retries":2,"backoffMs":1000}},
			{"id":"t","skill":"echo","onFail":{"then":"fallback","step":"f"}}],"fallbacks":[{"id":"f","skill":"echo","timeoutMs":5000,"onFail":"abort"}]}`,
		`{"id":"huge","name":"H","steps":[{"id":"s","skill":"echo","timeoutMs":86400000,"onFail":{"retries":5}}]}`))
	for id, want := range map[string]int64{
		"short": plan.DefaultPlanTimeoutMs,
		"long":  3*100000 + 1000 + 2000 + 30000 + 5000,
		"huge":  86400000 - 3600000, // capped to fit the default retention of a day
	} {
		tmpl, _ := l.Template(id)
		p, err := ToPlan(tmpl, nil)
		if err != nil {
			t.Fatal(err)
		}
		if p.TimeoutMs != want {
			t.Errorf("%s: timeout %d, want %d", id, p.TimeoutMs, want)
		}
	}
}

func TestInstantiateErrors(t *testing.T) {
	l := mustDecode(t, lib(`{"id":"p","name":"P","vars":{"a":{},"b":{"default":"x"}},
		"steps":[{"id":"s","skill":"echo","input":{"{a}":1,"{b}":2}},{"id":"t","skill":"echo","verify":{"type":"contains","value":"{a}"}}]}`))
	tmpl, _ := l.Template("p")
	tests := []struct {
		vars map[string]string
		want string
	}{
		{nil, `templates: bad variables: template "p": variable "a" is required (no default)`},
		{map[string]string{"a": "x"}, `step "s": input at : keys "{a}" and "{b}" both become "x"`},
		{map[string]string{"a": "", "b": "y"}, `step "t": verify: gate: invalid: value: a contains gate needs a non-empty string value`},
	}
	for _, tt := range tests {
		_, err := ToPlan(tmpl, tt.vars)
		if !errors.Is(err, ErrVars) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("vars %v: err = %v, want ErrVars containing %q", tt.vars, err, tt.want)
		}
	}
	if _, err := Instantiate(&Template{ID: "raw"}, nil); !errors.Is(err, ErrNotDecoded) {
		t.Errorf("template built in Go: err = %v, want ErrNotDecoded", err)
	}
	in, err := Instantiate(tmpl, map[string]string{"a": "k"})
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := in.Step("t"); !ok || s.Verify.Value != "k" {
		t.Errorf("Step(t) = %+v, %v", s, ok)
	}
	if _, ok := in.Step("zz"); ok {
		t.Error("Step found an unknown step")
	}
}

func TestParseToolMeta(t *testing.T) {
	tests := []struct {
		meta string
		want *ToolMeta
		err  string
	}{
		{``, nil, ""},
		{`{"owner":"someone"}`, nil, ""},
		{`{"verify":{"type":"exitCode"}}`, nil, ""}, // a gate is the plan's business
		{`{"onFail":"skip","other":1}`, &ToolMeta{OnFail: OnFail{Then: ActionSkip}}, ""},
		{`{"template":{"id":"t","version":"1","step":"a","index":1,"of":1},"onFail":"abort"}`,
			&ToolMeta{Template: TemplateStep{ID: "t", Version: "1", Step: "a", Index: 1, Of: 1}, OnFail: OnFail{Then: ActionAbort}}, ""},
		{`{"onFail":{"then":"fallback"}}`, nil, "onFail: then \"fallback\" needs exactly one of step"},
		{`{"onFail":{"then":"fallback","step":"x"},"fallback":{"step":"x","skill":"echo","onFail":"skip"}}`, nil, `fallback: json: unknown field "skill"`},
		{`{"fallback":{"step":"x","onFail":{"then":"bogus"}}}`, nil, `fallback.onFail: then "bogus"`},
		{`[1]`, nil, "templates: tool metadata: json: cannot unmarshal array"},
	}
	for _, tt := range tests {
		got, err := ParseToolMeta(json.RawMessage(tt.meta))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: err = %v, want %q", tt.meta, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.meta, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.meta, diff)
		}
	}
}

// A step may ask for a person's approval: its tool carries the approval,
// the prompt's placeholders filled in; an undeclared one is refused.
func TestStepApproval(t *testing.T) {
	l := mustDecode(t, lib(`{"id":"p","name":"P","vars":{"env":{"default":"staging"}},"steps":[
		{"id":"build","skill":"echo"},
		{"id":"deploy","skill":"echo","approval":{"prompt":"Deploy to {env}?"}}]}`))
	tmpl, _ := l.Template("p")
	p, err := ToPlan(tmpl, map[string]string{"env": "production"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Tools[0].Approval != nil || p.Tools[1].Approval == nil || p.Tools[1].Approval.Prompt != "Deploy to production?" {
		t.Errorf("approvals %+v, %+v; want deploy's, filled in", p.Tools[0].Approval, p.Tools[1].Approval)
	}
	_, err = Decode(lib(`{"id":"q","name":"Q","steps":[{"id":"s","skill":"echo","approval":{"prompt":"Go to {where}?"}}]}`))
	if err == nil || !strings.Contains(err.Error(), "{where} is not a declared variable") {
		t.Errorf("undeclared placeholder in a prompt: %v", err)
	}
}
