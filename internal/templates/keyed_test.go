package templates

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/planbus/planbus/internal/gate"
)

func keyedTestdata(t testing.TB) *Library {
	t.Helper()
	doc, err := os.ReadFile("testdata/keyed/library.json")
	if err != nil {
		t.Fatal(err)
	}
	return mustDecode(t, doc)
}

// A library written in the keyed format loads as written: plans in
// document order, thresholds and staleness with their defaults, steps
// with their tool, hint, check and on_fail.
func TestKeyedLibraryLoads(t *testing.T) {
	l := keyedTestdata(t)
	if !l.Keyed() || l.Version != "1.0" || !strings.HasPrefix(l.Description, "A plan library in the keyed format") {
		t.Errorf("keyed %v, version %q, description %q", l.Keyed(), l.Version, l.Description)
	}
	if diff := cmp.Diff([]string{"git_feature_branch", "bugfix_workflow", "docker_build_deploy"}, ids2(l.Plans)); diff != "" {
		t.Errorf("plans in document order (-want +got):\n%s", diff)
	}
	tests := []struct {
		id        string
		threshold int
		maxTurns  int
	}{
		{"git_feature_branch", 2, 10},
		{"bugfix_workflow", 1, 15},
		{"docker_build_deploy", DefaultTriggerThreshold, DefaultMaxTurns},
	}
	for _, tt := range tests {
		p, _ := l.Template(tt.id)
		if p.TriggerThreshold != tt.threshold || p.Staleness != (Staleness{MaxTurns: tt.maxTurns}) || p.Version != "1.0" {
			t.Errorf("%s: threshold %d, staleness %+v, version %q; want %d, maxTurns %d", tt.id, p.TriggerThreshold, p.Staleness, p.Version, tt.threshold, tt.maxTurns)
		}
	}
	git, _ := l.Template("git_feature_branch")
	s := git.Steps[1]
	if s.ID != "step2" || s.Name != "Create feature branch" || s.Skill != "code_execution_tool" || s.Hint != "git checkout -b feature/<name> main" ||
		*s.Check != (Check{Type: CheckOutputContains, Value: "Switched to a new branch"}) {
		t.Errorf("step 2: %+v", s)
	}
	onFails := []struct {
		id   string
		step int
		want OnFail
	}{
		{"git_feature_branch", 0, OnFail{Retries: 2, Then: ActionAbort, Guided: ActionWarn}},
		{"git_feature_branch", 1, OnFail{Retries: 2, Then: ActionAbort, Guided: ActionBlock}},
		{"git_feature_branch", 4, OnFail{Retries: 2, Then: ActionAbort}},
		{"bugfix_workflow", 4, OnFail{Retries: 2, Then: ActionSkip, Guided: ActionWarn}}, // required false
		{"docker_build_deploy", 0, OnFail{Then: ActionAbort}},
		{"docker_build_deploy", 2, OnFail{Then: ActionSkip}},
	}
	for _, tt := range onFails {
		p, _ := l.Template(tt.id)
		if got := p.Steps[tt.step].OnFail; got != tt.want {
			t.Errorf("%s step %d: onFail %+v, want %+v", tt.id, tt.step+1, got, tt.want)
		}
	}
}

func ids2(ts []*Template) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.ID)
	}
	return out
}

// Executed mode: a keyed plan becomes Plan JSON like any template, each
// step a tool of its tool's skill with its action and hint as input, its
// check as the tool's gate.
func TestKeyedToPlanGolden(t *testing.T) {
	l := keyedTestdata(t)
	for _, tmpl := range l.Plans {
		t.Run(tmpl.ID, func(t *testing.T) {
			p, err := ToPlan(tmpl, map[string]string{InputVar: "request text"})
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.MarshalIndent(p, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("keyed", tmpl.ID+".plan.json"), append(b, '\n'))
		})
	}
}

func TestKeyedMatch(t *testing.T) {
	l := keyedTestdata(t)
	tests := []struct {
		in   MatchInput
		want []string
	}{
		{MatchInput{Domain: "bugfix", Text: "Please debug the login module"}, []string{"bugfix_workflow"}},
		{MatchInput{Text: "Please debug the login module"}, []string{}}, // every plan lists domains
		{MatchInput{Domain: "git_ops", Text: "create branch login"}, []string{}},
		{MatchInput{Domain: "git_ops", Text: "create branch login as a new branch"}, []string{"git_feature_branch"}},
		{MatchInput{Domain: "docker_ops", Text: "docker build, then deploy container"}, []string{"docker_build_deploy"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, ids(Match(l, tt.in))); diff != "" {
			t.Errorf("%+v (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestCheckVerify(t *testing.T) {
	zero, two := 0, 2
	tests := []struct {
		check  Check
		output string
		code   *int
		ok     bool
		reason string
	}{
		{Check{Type: CheckOutputContains, Value: "On branch"}, `"on branch main\n"`, nil, true, `output contains "On branch"`},
		{Check{Type: CheckOutputContains, Value: "On branch"}, `"HEAD detached"`, nil, false, `output does not contain "On branch"`},
		{Check{Type: CheckOutputContains, Value: "ok"}, `{"stdout":"OK"}`, nil, true, `output contains "ok"`},
		{Check{Type: CheckOutputNotContains, Value: "error"}, `"All tests passed"`, nil, true, `output does not contain "error"`},
		{Check{Type: CheckOutputNotContains, Value: "error"}, `"ERROR: boom"`, nil, false, `output contains "error"`},
		{Check{Type: CheckExitCodeZero}, `"done"`, &zero, true, "exit code 0"},
		{Check{Type: CheckExitCodeZero}, `"done"`, &two, false, "exit code 2, want 0"},
		{Check{Type: CheckExitCodeZero}, `{"exitCode":1}`, nil, false, "exit code 1, want 0"},
		{Check{Type: CheckExitCodeZero}, `"built"`, nil, true, "no exit code, and the output mentions no error"},
		{Check{Type: CheckExitCodeZero}, `"Error: no space left"`, nil, false, `no exit code, and the output mentions "error"`},
		{Check{Type: CheckExitCodeZero}, `"process ended with exit code 3"`, nil, false, `no exit code, and the output mentions "exit code"`},
		{Check{Type: CheckAnyOutput}, `"  \n"`, nil, false, "output is empty"},
		{Check{Type: CheckAnyOutput}, ``, nil, false, "output is empty"},
		{Check{Type: CheckAnyOutput}, `null`, nil, false, "output is empty"},
		{Check{Type: CheckAnyOutput}, `{"a":1}`, nil, true, "output is not empty"},
		{Check{Type: CheckFileExists, Value: "image.tar"}, `""`, nil, true, "image.tar exists (the agent confirms it)"},
		{Check{Type: CheckManual}, ``, nil, true, "confirmed by the agent"},
		{Check{Type: "telepathy"}, `"x"`, nil, false, "unknown check type telepathy"},
	}
	for _, tt := range tests {
		ok, reason := tt.check.Verify(json.RawMessage(tt.output), tt.code)
		if ok != tt.ok || reason != tt.reason {
			t.Errorf("%+v on %s: %v %q; want %v %q", tt.check, tt.output, ok, reason, tt.ok, tt.reason)
		}
	}
}

// A check's gate says the same of an executed tool's output, for the
// checks a gate can make.
func TestCheckGate(t *testing.T) {
	tests := []struct {
		check  Check
		output string
		ok     bool
	}{
		{Check{Type: CheckOutputContains, Value: "On Branch"}, `"on branch main"`, true},
		{Check{Type: CheckOutputNotContains, Value: "error"}, `"an Error"`, false},
		{Check{Type: CheckExitCodeZero}, `{"exitCode":0}`, true},
		{Check{Type: CheckExitCodeZero}, `{"exitCode":1}`, false},
		{Check{Type: CheckAnyOutput}, `"  "`, false},
		{Check{Type: CheckOutputContains, Value: "{x}"}, `"a {x} b"`, true},
	}
	for _, tt := range tests {
		g := tt.check.Gate()
		// A gate's braces are placeholders; a keyed check's are literal.
		filled := fillGate(g, nil)
		if err := filled.Compile(); err != nil {
			t.Fatal(err)
		}
		if ok, why := filled.Check(json.RawMessage(tt.output)); ok != tt.ok {
			t.Errorf("%+v on %s: %v (%s), want %v", tt.check, tt.output, ok, why, tt.ok)
		}
		if verdict, _ := tt.check.Verify(json.RawMessage(tt.output), nil); verdict != tt.ok {
			t.Errorf("%+v on %s: Verify %v, gate %v", tt.check, tt.output, verdict, tt.ok)
		}
	}
	for _, c := range []Check{{Type: CheckFileExists, Value: "x"}, {Type: CheckManual}} {
		if g := c.Gate(); g != nil {
			t.Errorf("%s: gate %v, want none", c.Type, g)
		}
	}
	var g *gate.Gate = (&Check{Type: CheckExitCodeZero}).Gate()
	if g.String() != "exit code 0" {
		t.Errorf("exit_code_zero gate: %s", g)
	}
}

func TestKeyedDecodeErrors(t *testing.T) {
	keyed := func(plans string) []byte { return []byte(`{"_meta":{"version":"2"},"plans":{` + plans + `}}`) }
	const step = `{"name":"S","tool":"code_execution_tool"}`
	tests := []struct {
		name string
		doc  []byte
		want string
	}{
		{"no name", keyed(`"p":{"steps":[` + step + `]}`), `template "p": at /plans/p: missing property 'name'`},
		{"bad plan id", keyed(`"a b":{"name":"P","steps":[` + step + `]}`), `plans: plan id "a b": want 1 to 64 letters, digits, '_' or '-'`},
		// A step may leave its tool out (TestKeyedStepWithoutTool), not its name.
		{"step without name", keyed(`"p":{"name":"P","steps":[{"tool":"t"}]}`), `template "p": at /plans/p/steps/0: missing property 'name'`},
		{"bad on_fail", keyed(`"p":{"name":"P","steps":[{"name":"S","tool":"t","on_fail":"explode"}]}`), `at /plans/p/steps/0/on_fail`},
		{"unknown check", keyed(`"p":{"name":"P","steps":[{"name":"S","tool":"t","verify":{"type":"vibes"}}]}`), `at /plans/p/steps/0/verify/type`},
		{"check without value", keyed(`"p":{"name":"P","steps":[{"name":"S","tool":"t","verify":{"type":"output_contains"}}]}`), `at /plans/p/steps/0/verify: missing property 'value'`},
		{"camelCase field", keyed(`"p":{"name":"P","triggerThreshold":1,"steps":[` + step + `]}`), `additional properties 'triggerThreshold' not allowed`},
		{"plan given twice", keyed(`"p":{"name":"P","steps":[` + step + `]},"p":{"name":"Q","steps":[` + step + `]}`), `template "p": the plan id appears twice in plans`},
		{"default threshold above triggers", keyed(`"p":{"name":"P","triggers":["one"],"steps":[` + step + `]}`),
			`template "p": trigger_threshold: the default is 2, but the plan has only 1 trigger`},
		{"threshold above triggers", keyed(`"p":{"name":"P","triggers":["one","two"],"trigger_threshold":3,"steps":[` + step + `]}`),
			`template "p": trigger_threshold: 3, but the plan has only 2 triggers`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.doc)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v\nwant ErrInvalid containing %q", err, tt.want)
			}
		})
	}
}

// Text in the keyed format has no placeholders: braces stay as written,
// in the guided context and in the plan.
func TestKeyedBracesAreLiteral(t *testing.T) {
	l := mustDecode(t, []byte(`{"plans":{"p":{"name":"P","steps":[{"name":"Inspect {id}","tool":"code_execution_tool",
		"tool_hint":"docker inspect -f '{{.Id}}' {image}","verify":{"type":"output_contains","value":"{"}}]}}}`))
	if l.Version != DefaultKeyedVersion {
		t.Errorf("version %q", l.Version)
	}
	tmpl, _ := l.Template("p")
	p, err := ToPlan(tmpl, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(p.Tools[0].Input); got != `{"hint":"docker inspect -f '{{.Id}}' {image}"}` {
		t.Errorf("input %s", got)
	}
	if p.Tools[0].Description != "Step 1/1: Inspect {id}" || p.Tools[0].Verify.String() != `output contains "{"` {
		t.Errorf("description %q, gate %s", p.Tools[0].Description, p.Tools[0].Verify)
	}
	tr, err := NewGuidedTracker(tmpl, nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.Context(""); !strings.Contains(got, "Inspect {id} ← YOU ARE HERE") || !strings.Contains(got, "Command hint: docker inspect -f '{{.Id}}' {image}") {
		t.Errorf("context:\n%s", got)
	}
}

// A step without a tool is manual, as the seed's loader allows: the guided
// context names no tool but still checks the step; an executed plan waits
// for a person's approval, prompted with the step's name and action, and
// records it with ManualSkill, without a gate.
func TestKeyedStepWithoutTool(t *testing.T) {
	l := mustDecode(t, []byte(`{"plans":{"p":{"name":"P","triggers":["go"],"trigger_threshold":1,"steps":[
		{"name":"Look","tool":"code_execution_tool","verify":{"type":"any_output"}},
		{"name":"Make changes","action":"Edit {the} files","tool_hint":"your editor","verify":{"type":"output_contains","value":"saved"}},
		{"name":"Report","tool":"code_execution_tool"}]}}}`))
	tmpl, _ := l.Template("p")
	if !tmpl.Steps[1].Manual() || tmpl.Steps[0].Manual() {
		t.Fatalf("manual: %v, %v", tmpl.Steps[0].Manual(), tmpl.Steps[1].Manual())
	}

	p, err := ToPlan(tmpl, nil)
	if err != nil {
		t.Fatal(err)
	}
	tool := p.Tools[1]
	wantPrompt := "Step 2/3: Make changes: Edit {the} files (a step without a tool: approve it once it is done)"
	if tool.Skill != ManualSkill || tool.Approval == nil || tool.Approval.Prompt != wantPrompt || tool.Verify != nil ||
		string(tool.Input) != `{"action":"Edit {the} files","hint":"your editor"}` {
		t.Errorf("manual tool: skill %q, approval %+v, verify %v, input %s; want %s, prompt %q, no gate",
			tool.Skill, tool.Approval, tool.Verify, tool.Input, ManualSkill, wantPrompt)
	}
	if p.Tools[0].Approval != nil || p.Tools[0].Verify == nil {
		t.Errorf("step 1 is not manual: approval %+v, verify %v", p.Tools[0].Approval, p.Tools[0].Verify)
	}
	in, err := Instantiate(tmpl, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTracker(in, t0)
	if _, err := tr.Observe(Result{Step: "step1", Succeeded: true, Output: json.RawMessage(`"ls"`), At: t0}); err != nil {
		t.Fatal(err)
	}
	if got := tr.Summary(); !strings.Contains(got, "Step 2/3: Make changes → next\n  Action: Edit {the} files\n  Manual: no tool; a person approves it once it is done\n") {
		t.Errorf("summary:\n%s", got)
	}

	_, replies := play(t, l, []turn{say("", "go"), ran(`"ls"`), ran(`"not yet"`), ran(`"file saved"`)})
	ctx := replies[1].Context
	if !strings.Contains(ctx, "Step 2 of 3: Make changes ← YOU ARE HERE\n  Action: Edit {the} files\n  Command hint: your editor\n  Verify: output contains \"saved\"\n") {
		t.Errorf("context of the manual step (no Tool line):\n%s", ctx)
	}
	if r := replies[2]; r.Transition != "warned" || r.Check == nil || r.Check.Passed {
		t.Errorf("manual step, output without 'saved': %s %+v", r.Transition, r.Check)
	}
	if r := replies[3]; r.Transition != "advanced" || r.Plan.Step != 3 {
		t.Errorf("manual step, output with 'saved': %s, step %d", r.Transition, r.Plan.Step)
	}
}
