package gate

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

const shellOK = `{"exitCode":0,"stdout":"## main...origin/main\n M README.md\n","stderr":"Switched to a new branch 'feature/x'\n","truncated":false,"durationMs":4}`

func TestGateCheck(t *testing.T) {
	tests := []struct {
		name   string
		gate   string
		output string
		ok     bool
		reason string
	}{
		{"nonEmpty string", `{"type":"nonEmpty","path":"/stdout"}`, shellOK, true, "/stdout is not empty"},
		{"nonEmpty blank", `{"type":"nonEmpty","path":"/stdout"}`, `{"stdout":" \n"}`, false, "/stdout is empty"},
		{"nonEmpty empty object", `{"type":"nonEmpty"}`, `{}`, false, "output is empty"},
		{"nonEmpty empty array", `{"type":"nonEmpty","path":"/a"}`, `{"a":[]}`, false, "/a is empty"},
		{"nonEmpty null output", `{"type":"nonEmpty"}`, ``, false, "output is empty"},
		{"nonEmpty number", `{"type":"nonEmpty","path":"/n"}`, `{"n":0}`, true, "/n is not empty"},
		{"nonEmpty missing", `{"type":"nonEmpty","path":"/nope"}`, `{}`, false, "output has nothing at /nope"},
		{"contains any case", `{"type":"contains","path":"/stderr","value":"switched TO"}`, shellOK, true, `/stderr contains "switched TO"`},
		{"contains case-sensitive", `{"type":"contains","path":"/stderr","value":"switched","caseSensitive":true}`, shellOK, false, `/stderr does not contain "switched"`},
		{"contains whole output as JSON", `{"type":"contains","value":"\"exitCode\":0"}`, shellOK, true, `output contains "\"exitCode\":0"`},
		{"contains in a plain string output", `{"type":"contains","value":"hello"}`, `"Hello, world"`, true, `output contains "hello"`},
		{"notContains passes", `{"type":"notContains","path":"/stdout","value":"error"}`, shellOK, true, `/stdout does not contain "error"`},
		{"notContains fails", `{"type":"notContains","path":"/stdout","value":"readme"}`, shellOK, false, `/stdout contains "readme"`},
		{"matches multiline", `{"type":"matches","path":"/stdout","pattern":"(?m)^ M "}`, shellOK, true, "/stdout matches /(?m)^ M /"},
		{"matches fails", `{"type":"matches","path":"/stdout","pattern":"^ok\\s"}`, shellOK, false, `/stdout does not match /^ok\s/`},
		{"equals number", `{"type":"equals","path":"/exitCode","value":0}`, shellOK, true, "/exitCode = 0"},
		{"equals number written differently", `{"type":"equals","path":"/n","value":1}`, `{"n":1.0}`, true, "/n = 1"},
		{"equals object", `{"type":"equals","path":"/a","value":{"b":[1,"x"]}}`, `{"a":{"b":[1,"x"]}}`, true, `/a = {"b":[1,"x"]}`},
		{"equals empty string", `{"type":"equals","path":"/stdout","value":""}`, `{"stdout":""}`, true, `/stdout = ""`},
		{"equals fails", `{"type":"equals","path":"/stdout","value":""}`, `{"stdout":"conflict.go\n"}`, false, `/stdout is "conflict.go\n", want ""`},
		{"equals type differs", `{"type":"equals","path":"/n","value":"1"}`, `{"n":1}`, false, `/n is 1, want "1"`},
		{"exists", `{"type":"exists","path":"/body/paths"}`, `{"body":{"paths":{}}}`, true, "/body/paths exists"},
		{"exists null", `{"type":"exists","path":"/a"}`, `{"a":null}`, true, "/a exists"},
		{"exists array index", `{"type":"exists","path":"/a/1"}`, `{"a":[1,2]}`, true, "/a/1 exists"},
		{"exists out of range", `{"type":"exists","path":"/a/2"}`, `{"a":[1,2]}`, false, "output has nothing at /a/2"},
		{"exists leading zero index", `{"type":"exists","path":"/a/01"}`, `{"a":[1,2]}`, false, "output has nothing at /a/01"},
		{"exists escaped", `{"type":"exists","path":"/a~1b/c~0d"}`, `{"a/b":{"c~d":1}}`, true, "/a~1b/c~0d exists"},
		{"exitCode default 0", `{"type":"exitCode"}`, shellOK, true, "exit code 0"},
		{"exitCode other", `{"type":"exitCode","value":1}`, `{"exitCode":1}`, true, "exit code 1"},
		{"exitCode fails", `{"type":"exitCode","value":0}`, `{"exitCode":2}`, false, "exit code 2, want 0"},
		{"exitCode not a number", `{"type":"exitCode"}`, `{"exitCode":"0"}`, false, `/exitCode is "0", not an exit code`},
		{"exitCode missing", `{"type":"exitCode"}`, `{"status":200}`, false, "output has nothing at /exitCode"},
		{"exitCode own path", `{"type":"exitCode","path":"/result/code","value":3}`, `{"result":{"code":3}}`, true, "exit code at /result/code is 3"},
		{"httpStatus default 2xx", `{"type":"httpStatus"}`, `{"status":204}`, true, "HTTP status 2xx"},
		{"httpStatus class", `{"type":"httpStatus","value":"4XX"}`, `{"status":404}`, true, "HTTP status 4xx"},
		{"httpStatus exact", `{"type":"httpStatus","value":201}`, `{"status":200}`, false, "HTTP status 200, want 201"},
		{"httpStatus class fails", `{"type":"httpStatus","value":"2xx"}`, `{"status":301}`, false, "HTTP status 301, want 2xx"},
		{"expr number", `{"type":"expr","expr":"output.exitCode == 0 && len(output.stdout) > 3"}`, shellOK, true, "expr output.exitCode == 0 && len(output.stdout) > 3"},
		{"expr text of path", `{"type":"expr","path":"/stdout","expr":"text contains 'README'"}`, shellOK, true, "expr text contains 'README'"},
		{"expr type", `{"type":"expr","expr":"type(output.body) in ['map', 'array']"}`, `{"body":[1]}`, true, "expr type(output.body) in ['map', 'array']"},
		{"expr false", `{"type":"expr","expr":"output.status < 300"}`, `{"status":500}`, false, `expr "output.status < 300" is false`},
		{"expr runtime error", `{"type":"expr","expr":"output.a.b > 1"}`, `{"a":"x"}`, false, `expr "output.a.b > 1": `},
		{"expr null output", `{"type":"expr","expr":"output == nil"}`, ``, true, "expr output == nil"},
		{"all passes", `{"type":"all","gates":[{"type":"exitCode"},{"type":"contains","path":"/stdout","value":"main"}]}`, shellOK, true, `exit code 0 and /stdout contains "main"`},
		{"all names the first failure", `{"type":"all","gates":[{"type":"exitCode"},{"type":"contains","path":"/stdout","value":"nope"}]}`, shellOK, false, `/stdout does not contain "nope"`},
		{"not JSON", `{"type":"nonEmpty"}`, `{"a":`, false, "output is not JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := Parse([]byte(tt.gate))
			if err != nil {
				t.Fatal(err)
			}
			ok, reason := g.Check(json.RawMessage(tt.output))
			if ok != tt.ok || !strings.HasPrefix(reason, tt.reason) {
				t.Errorf("Check = %v, %q; want %v, %q", ok, reason, tt.ok, tt.reason)
			}
			// A gate built in Go and never compiled checks the same.
			var raw Gate
			if err := json.Unmarshal([]byte(tt.gate), &raw); err != nil {
				t.Fatal(err)
			}
			if ok2, reason2 := raw.Check(json.RawMessage(tt.output)); ok2 != ok || reason2 != reason {
				t.Errorf("uncompiled Check = %v, %q; compiled %v, %q", ok2, reason2, ok, reason)
			}
		})
	}
}

func TestGateFromGo(t *testing.T) {
	g := &Gate{Type: Equals, Path: "/n", Value: 3}
	if ok, why := g.Check(json.RawMessage(`{"n":3}`)); !ok {
		t.Errorf("Go int value: %s", why)
	}
	g = &Gate{Type: ExitCode, Value: int64(2)}
	if ok, why := g.Check(json.RawMessage(`{"exitCode":2}`)); !ok {
		t.Errorf("Go int64 exit code: %s", why)
	}
	var nilGate *Gate
	if ok, why := nilGate.Check(json.RawMessage(`"anything"`)); !ok || why != "no gate" {
		t.Errorf("nil gate: %v %q", ok, why)
	}
	if s := nilGate.String(); s != "no gate" {
		t.Errorf("nil gate String = %q", s)
	}
	bad := &Gate{Type: "nope"}
	if ok, why := bad.Check(nil); ok || !strings.Contains(why, "unknown gate type") {
		t.Errorf("invalid gate: %v %q", ok, why)
	}
}

func TestParseGateErrors(t *testing.T) {
	tests := []struct{ gate, want string }{
		{`{"type":"sometimes"}`, `type: unknown gate type "sometimes"`},
		{`{"type":"contains"}`, "value: a contains gate needs a non-empty string value"},
		{`{"type":"contains","value":3}`, "value: a contains gate needs a non-empty string value"},
		{`{"type":"matches"}`, "pattern: a matches gate needs a pattern"},
		{`{"type":"matches","pattern":"a("}`, "pattern: error parsing regexp"},
		{`{"type":"matches","pattern":"a{2000}"}`, "pattern: error parsing regexp: invalid repeat count"},
		{`{"type":"equals"}`, "value: an equals gate needs a value"},
		{`{"type":"exists"}`, "path: exists needs a path"},
		{`{"type":"exists","path":"a/b"}`, `path: JSON pointer "a/b" must be empty or start with '/'`},
		{`{"type":"exists","path":"/a~2"}`, `'~' must be followed by 0 or 1`},
		{`{"type":"exitCode","value":"0"}`, `value: an exitCode gate needs an integer value, got "0"`},
		{`{"type":"exitCode","value":1.5}`, "an exitCode gate needs an integer value, got 1.5"},
		{`{"type":"httpStatus","value":"6xx"}`, `an httpStatus gate needs a status 100..599 or a class`},
		{`{"type":"httpStatus","value":99}`, `an httpStatus gate needs a status`},
		{`{"type":"expr"}`, "expr: an expr gate needs an expression"},
		{`{"type":"expr","expr":"output +"}`, "expr: unexpected token EOF"},
		{`{"type":"expr","expr":"1 + 1"}`, "expr: expected bool, but got int"},
		{`{"type":"expr","expr":"now().Year() > 2000"}`, "expr: now is not available in gate expressions"},
		{`{"type":"expr","expr":"len(keys(output)) > 0"}`, "expr: keys is not available in gate expressions"},
		{`{"type":"expr","expr":"len(repeat(repeat(text, 999999), 999999)) > 0"}`, "expr: repeat is not available in gate expressions"},
		{`{"type":"expr","expr":"len(join(map(1..100000, text), text)) > 0"}`, "expr: ranges (a..b) are not available in gate expressions"},
		{`{"type":"expr","expr":"len(join(map(output.items, text), text)) > 0"}`, "expr: map is not available in gate expressions"},
		{`{"type":"expr","expr":"all(output.items, {all(output.items, {true})})"}`, "expr: a predicate inside another is not available in gate expressions"},
		{`{"type":"expr","expr":"text matches text"}`, "expr: matches takes a constant pattern here"},
		{`{"type":"expr","expr":"len(string(output)) > 0"}`, "expr: string is not available in gate expressions"},
		{`{"type":"expr","expr":"` + strings.Repeat("1 + ", 1000) + `1 > 0"}`, "exceeds maximum allowed nodes"},
		{`{"type":"all","gates":[]}`, "gates: an all gate needs at least one gate"},
		{`{"type":"all","gates":[{"type":"nope"}]}`, `gates/0: gate: invalid: type: unknown gate type "nope"`},
		{`{"type":"all","path":"/x","gates":[{"type":"nonEmpty"}]}`, "path: not used by an all gate"},
		{`{"type":"nonEmpty","value":"x"}`, "value: not used by a nonEmpty gate"},
		{`{"type":"matches","pattern":"x","caseSensitive":true}`, "caseSensitive: not used by a matches gate"},
		{`{"type":"nonEmpty","pattrn":"x"}`, `unknown field "pattrn"`},
		{`[]`, "cannot unmarshal array"},
	}
	for _, tt := range tests {
		t.Run(tt.gate, func(t *testing.T) {
			_, err := Parse([]byte(tt.gate))
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %q, want it to contain %q", err.Error(), tt.want)
			}
		})
	}
	deep := `{"type":"nonEmpty"}`
	for range maxGateDepth + 1 {
		deep = `{"type":"all","gates":[` + deep + `]}`
	}
	if _, err := Parse([]byte(deep)); err == nil || !strings.Contains(err.Error(), "nested deeper than") {
		t.Errorf("deep gate: %v", err)
	}
}

// A compiled gate is shared by the dispatcher's goroutines.
func TestGateConcurrentCheck(t *testing.T) {
	g, err := Parse([]byte(`{"type":"all","gates":[{"type":"expr","expr":"output.exitCode == 0"},{"type":"matches","path":"/stdout","pattern":"main"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if ok, why := g.Check(json.RawMessage(shellOK)); !ok {
					t.Error(why)
					return
				}
			}
		})
	}
	wg.Wait()
}

// A gate comes with a plan, from whoever may submit one, and runs on a
// dispatcher: what checking it may build is bounded. Strings joined past
// safeexpr.MaxString, and ranges past the VM's budget, fail the gate with
// the reason instead of taking the node's memory (the twenty doublings of
// a KiB of output would make a gigabyte).
func TestGateExpressionsCannotExhaustMemory(t *testing.T) {
	output := `{"s": "` + strings.Repeat("x", 1024) + `"}`
	doubled := func(start, double string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "let a0 = %s; ", start)
		for i := 1; i <= 20; i++ {
			prev := fmt.Sprintf("a%d", i-1)
			fmt.Fprintf(&b, "let a%d = %s; ", i, strings.ReplaceAll(double, "X", prev))
		}
		b.WriteString("len(a20) > 0")
		return b.String()
	}
	for _, c := range []struct{ name, expr, want string }{
		{"text doubled", doubled("text", "X + X"), "expressions make strings of at most 16384"},
		{"output doubled through an untyped value", doubled("output.s", "X + X"), "expressions make strings of at most 16384"},
		// The optimizer would make sum of an array literal a + unchecked.
		{"text doubled by sum", doubled("text", "sum([X, X])"), "expr "},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc, _ := json.Marshal(map[string]any{"type": "expr", "path": "/s", "expr": c.expr})
			g, err := Parse(doc)
			if err != nil {
				t.Fatal(err)
			}
			if ok, why := g.Check(json.RawMessage(output)); ok || !strings.Contains(why, c.want) {
				t.Fatalf("check: %v %q; want it failed naming %q", ok, why, c.want)
			}
		})
	}
	// Within bounds, + still joins strings.
	g, err := Parse([]byte(`{"type":"expr","path":"/s","expr":"len(text + text) == 2048 && indexOf(output.s + '!', '!') == 1024"}`))
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := g.Check(json.RawMessage(output)); !ok {
		t.Fatalf("bounded join: %s", why)
	}
}
