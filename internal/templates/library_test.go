package templates

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/planbus/planbus/internal/gate"
	"github.com/planbus/planbus/schemas"
)

// lib wraps plans in a library document.
func lib(plans ...string) []byte {
	return []byte(`{"version":"1","plans":[` + strings.Join(plans, ",") + `]}`)
}

func mustDecode(t testing.TB, doc []byte) *Library {
	t.Helper()
	l, err := Decode(doc)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func starter(t testing.TB) *Library {
	t.Helper()
	doc, err := os.ReadFile("../../examples/templates/library.json")
	if err != nil {
		t.Fatal(err)
	}
	return mustDecode(t, doc)
}

func TestDecodeDefaults(t *testing.T) {
	l := mustDecode(t, lib(`{"id":"p","name":"P","triggers":["a","b"],"steps":[{"id":"one","skill":"echo"},{"id":"two","skill":"echo","onFail":{"then":"skip"}},
		{"id":"three","skill":"echo","after":[]}]}`, `{"id":"q","version":"7","name":"Q","staleness":{"maxAgeMs":5},"steps":[{"id":"one","skill":"echo"}]}`))
	p, ok := l.Template("p")
	if !ok {
		t.Fatal("no template p")
	}
	if p.Version != "1" || p.TriggerThreshold != DefaultTriggerThreshold || p.Staleness != (Staleness{MaxTurns: DefaultMaxTurns}) {
		t.Errorf("p: version %q threshold %d staleness %+v", p.Version, p.TriggerThreshold, p.Staleness)
	}
	if p.Steps[0].OnFail != DefaultOnFail() || p.Steps[1].OnFail != (OnFail{Then: ActionSkip}) {
		t.Errorf("onFail defaults: %+v %+v", p.Steps[0].OnFail, p.Steps[1].OnFail)
	}
	if diff := cmp.Diff([][]string{{}, {"one"}, {}}, p.deps); diff != "" {
		t.Errorf("deps (-want +got):\n%s", diff)
	}
	q, _ := l.Template("q")
	if q.Version != "7" || q.Staleness != (Staleness{MaxAgeMs: 5, MaxTurns: DefaultMaxTurns}) {
		t.Errorf("q: version %q staleness %+v", q.Version, q.Staleness)
	}
	if _, ok := l.Template("nope"); ok {
		t.Error("found a template that is not there")
	}
}

func TestDecodeErrors(t *testing.T) {
	const ok = `{"id":"s","skill":"echo"}`
	plan := func(fields string, steps ...string) string {
		if len(steps) == 0 {
			steps = []string{ok}
		}
		if fields != "" {
			fields += ","
		}
		return `{"id":"p","name":"P",` + fields + `"steps":[` + strings.Join(steps, ",") + `]}`
	}
	tests := []struct {
		name string
		doc  []byte
		want string
	}{
		{"not JSON", []byte(`{"plans":`), "templates: malformed JSON"},
		{"schema, naming the template", lib(plan(``, `{"id":"s"}`)), `templates: template "p": at /plans/0/steps/0: missing property 'skill'`},
		{"schema, typo", lib(plan(`"trigers":["x"]`)), `at /plans/0: additional properties 'trigers' not allowed`},
		{"schema, bad gate type", lib(plan(``, `{"id":"s","skill":"echo","verify":{"type":"maybe"}}`)), `at /plans/0/steps/0/verify/type`},
		{"schema, bad onFail", lib(plan(``, `{"id":"s","skill":"echo","onFail":"maybe"}`)), `at /plans/0/steps/0/onFail`},
		{"schema, bad guided", lib(plan(``, `{"id":"s","skill":"echo","onFail":{"guided":"skip"}}`)), `at /plans/0/steps/0/onFail`},
		{"schema, no version", []byte(`{"plans":[]}`), "missing property 'version'"},
		{"duplicate template", lib(plan(``), plan(``)), `templates: template "p": id: plan #1 repeats the id of an earlier plan`},
		{"duplicate step", lib(plan(``, ok, ok)), `template "p": step "s": id: repeats the id of an earlier step`},
		{"step id reused by a fallback", lib(plan(`"fallbacks":[{"id":"s","skill":"echo"}]`)), `fallback step "s": id: repeats the id`},
		{"threshold above triggers", lib(plan(`"triggers":["a"],"triggerThreshold":2`)), `triggerThreshold: 2, but the plan has only 1 triggers`},
		{"default threshold above triggers", lib(plan(`"triggers":["a"]`)),
			`template "p": triggerThreshold: the default is 2, but the plan has only 1 trigger, so no text would ever match it: give triggerThreshold 1 or more triggers`},
		{"undeclared placeholder in a hint", lib(plan(``, `{"id":"s","skill":"echo","hint":"run {it}"}`)), `step "s": hint: {it} is not a declared variable`},
		{"trigger without words", lib(plan(`"triggers":["a","--"]`)), `triggers/1: "--" has no words`},
		{"duplicate trigger", lib(plan(`"triggers":["Fix bug","fix  BUG!"]`)), `triggers/1: "fix  BUG!" is the same phrase as trigger "Fix bug"`},
		{"input declared", lib(plan(`"vars":{"input":{}}`)), `vars/input: input is the request's text`},
		{"bad var pattern", lib(plan(`"vars":{"x":{"pattern":"("}}`)), `vars/x/pattern: error parsing regexp`},
		{"default against pattern", lib(plan(`"vars":{"x":{"pattern":"[a-z]+","default":"A1"}}`)), `vars/x/default: "A1" does not match the pattern [a-z]+`},
		{"default with placeholder", lib(plan(`"vars":{"x":{"default":"{input}"}}`)), `vars/x/default: a default cannot use placeholders ({input})`},
		{"bad capture", lib(plan(`"captures":["(?P<x>"]`, ok)), `captures/0: error parsing regexp`},
		{"capture of an undeclared var", lib(plan(`"captures":["(?P<x>a)"]`)), `captures/0: group "x" is not a declared variable`},
		{"capture without a group", lib(plan(`"vars":{"x":{}},"captures":["abc"]`)), `captures/0: no named group`},
		{"undeclared placeholder in input", lib(plan(``, `{"id":"s","skill":"echo","input":{"a":["x","{branch}"]}}`)), `step "s": input/a/1: {branch} is not a declared variable`},
		{"undeclared placeholder in a key", lib(plan(``, `{"id":"s","skill":"echo","input":{"{k}":1}}`)), `input/{k} (key): {k} is not a declared variable`},
		{"undeclared placeholder in name", lib(plan(``, `{"id":"s","name":"Do {it}","skill":"echo"}`)), `step "s": name: {it} is not a declared variable`},
		{"undeclared placeholder in a gate", lib(plan(``, `{"id":"s","skill":"echo","verify":{"type":"all","gates":[{"type":"contains","value":"{v}"}]}}`)), `step "s": verify.gates/0.value: {v} is not a declared variable`},
		{"bad gate regex", lib(plan(``, `{"id":"s","skill":"echo","verify":{"type":"matches","pattern":"a)"}}`)), `step "s": verify: pattern: error parsing regexp: unexpected )`},
		{"bad gate expression", lib(plan(``, `{"id":"s","skill":"echo","verify":{"type":"expr","expr":"output."}}`)), `step "s": verify: expr:`},
		{"gate field of another type", lib(plan(``, `{"id":"s","skill":"echo","verify":{"type":"exists","path":"/a","value":1}}`)), `step "s": verify: value: not used by a exists gate`},
		{"fallback without target", lib(plan(``, `{"id":"s","skill":"echo","onFail":{"then":"fallback"}}`)), `step "s": onFail: then "fallback" needs exactly one of step`},
		{"target without fallback", lib(plan(``, `{"id":"s","skill":"echo","onFail":{"then":"skip","plan":"q"}}`)), `onFail: step and plan are only for then "fallback"`},
		{"unknown fallback step", lib(plan(``, `{"id":"s","skill":"echo","onFail":{"then":"fallback","step":"x"}}`)), `step "s": onFail.step: no fallback step "x"`},
		{"fallback to a main step", lib(plan(``, ok, `{"id":"t","skill":"echo","onFail":{"then":"fallback","step":"s"}}`)), `step "t": onFail.step: "s" is a main step`},
		{"fallback of a fallback", lib(plan(`"fallbacks":[{"id":"f","skill":"echo","onFail":{"then":"fallback","step":"g"}},{"id":"g","skill":"echo"}]`,
			`{"id":"s","skill":"echo","onFail":{"then":"fallback","step":"f"}}`)), `fallback step "f": onFail.step: a fallback step cannot fall back to another step`},
		{"unused fallback", lib(plan(`"fallbacks":[{"id":"f","skill":"echo"}]`)), `fallback step "f": no step's onFail falls back to it`},
		{"fallback with after", lib(plan(`"fallbacks":[{"id":"f","skill":"echo","after":[]}]`, `{"id":"s","skill":"echo","onFail":{"then":"fallback","step":"f"}}`)),
			`fallback step "f": after: a fallback step runs after`},
		{"unknown fallback plan", lib(plan(``, `{"id":"s","skill":"echo","onFail":{"then":"fallback","plan":"q"}}`)), `step "s": onFail.plan: no plan "q" in the library`},
		{"fallback to itself", lib(plan(``, `{"id":"s","skill":"echo","onFail":{"then":"fallback","plan":"p"}}`)), `onFail.plan: a template cannot fall back to itself`},
		{"after unknown", lib(plan(``, `{"id":"s","skill":"echo","after":["x"]}`)), `step "s": after/0: no step "x"`},
		{"after itself", lib(plan(``, `{"id":"s","skill":"echo","after":["s"]}`)), `step "s": after/0: a step cannot run after itself`},
		{"after twice", lib(plan(``, ok, `{"id":"t","skill":"echo","after":["s","s"]}`)), `step "t": after/1: "s" is listed twice`},
		{"after a fallback", lib(plan(`"fallbacks":[{"id":"f","skill":"echo"}]`, `{"id":"s","skill":"echo","onFail":{"then":"fallback","step":"f"}}`, `{"id":"t","skill":"echo","after":["f"]}`)),
			`step "t": after/0: "f" is a fallback step`},
		{"cycle", lib(plan(``, `{"id":"a","skill":"echo","after":["c"]}`, `{"id":"b","skill":"echo","after":["a"]}`, `{"id":"c","skill":"echo","after":["b"]}`)),
			`template "p": steps: after: cycle: a -> c -> b -> a (each step runs after the next)`},
		{"ref to a later step", lib(plan(``, `{"id":"a","skill":"echo","input":{"x":{"$ref":"b"}}}`, `{"id":"b","skill":"echo"}`)),
			`template "p": as a plan: tool "a": input at /x references "b", which it does not depend on`},
		{"ref to a parallel step", lib(plan(``, `{"id":"a","skill":"echo"}`, `{"id":"b","skill":"echo","after":[],"input":{"x":{"$ref":"a#/y"}}}`)),
			`tool "b": input at /x references "a"`},
		{"fallback's ref beyond its step's", lib(plan(`"fallbacks":[{"id":"f","skill":"echo","input":{"x":{"$ref":"b"}}}]`,
			`{"id":"a","skill":"echo","onFail":{"then":"fallback","step":"f"}}`, `{"id":"b","skill":"echo"}`)),
			`template "p": fallback step "f": input: in place of step "a": tool "a": input at /x references "b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.doc)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %q\nwant it to contain %q", err.Error(), tt.want)
			}
		})
	}
}

func TestDecodeSchemaErrorUnwraps(t *testing.T) {
	_, err := Decode(lib(`{"id":"p","name":"P","steps":[]}`))
	var se *schemas.Error
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want a *schemas.Error inside", err)
	}
	_, err = Decode(lib(`{"id":"p","name":"P","steps":[{"id":"s","skill":"echo","verify":{"type":"matches","pattern":"("}}]}`))
	if !errors.Is(err, gate.ErrInvalid) || !errors.Is(err, ErrInvalid) {
		t.Errorf("gate error %v should match ErrInvalid and gate.ErrInvalid", err)
	}
}

func TestStarterLibrary(t *testing.T) {
	l := starter(t)
	var ids []string
	for _, p := range l.Plans {
		ids = append(ids, p.ID)
		if p.Description == "" || len(p.Triggers) == 0 || len(p.Domains) == 0 {
			t.Errorf("%s: needs a description, triggers and domains", p.ID)
		}
		for _, s := range p.Steps {
			if s.Skill == "shell" && !strings.Contains(p.Description, "Shell programs:") {
				t.Errorf("%s: runs shell steps but does not name its programs", p.ID)
			}
		}
	}
	want := []string{"git_feature_branch", "git_merge_pr", "docker_build_deploy", "bugfix_workflow", "file_backup_restore",
		"api_integration", "codegen_module", "refactor_safe", "dependency_update", "log_investigation"}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("starter plans (-want +got):\n%s", diff)
	}
}

// ReadFile decodes a library file, and an error names the file.
func TestReadFile(t *testing.T) {
	lib, err := ReadFile("../../examples/templates/library.json")
	if err != nil || len(lib.Plans) == 0 {
		t.Fatalf("the starter library: %d plans, %v", len(lib.Plans), err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"version":"1","plans":[{}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("a library that breaks its schema: %v, want an error naming %s", err, bad)
	}
	missing := filepath.Join(t.TempDir(), "none.json")
	if _, err := ReadFile(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v, want fs.ErrNotExist", err)
	}
}
