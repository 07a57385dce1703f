package templates

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/planbus/planbus"
)

func FuzzDecode(f *testing.F) {
	if doc, err := os.ReadFile("../../examples/templates/library.json"); err == nil {
		f.Add(doc)
	}
	if doc, err := os.ReadFile("testdata/keyed/library.json"); err == nil {
		f.Add(doc)
	}
	f.Add(lib(`{"id":"p","name":"P","triggers":["fix bug*"],"triggerThreshold":1,"vars":{"a":{"default":"x","pattern":"[a-z]"}},"captures":["(?P<a>[a-z])"],
		"steps":[{"id":"s","skill":"echo","input":{"{a}":"{input}","r":{"$ref":"t"}},"verify":{"type":"contains","value":"{a}"}},
		{"id":"t","skill":"echo","after":[],"onFail":{"then":"fallback","step":"f"}}],"fallbacks":[{"id":"f","skill":"echo","onFail":"skip"}]}`))
	f.Add(lib(`{"id":"p","name":"P","steps":[{"id":"a","skill":"echo","after":["b"]},{"id":"b","skill":"echo","after":["a"]}]}`))
	f.Add([]byte(`{"plans":{"p":{"name":"P","triggers":["go"],"trigger_threshold":1,"steps":[{"name":"Do {it}","action":"by hand","verify":{"type":"manual"}}]}}}`))
	f.Add(lib(`{"id":"p","name":"P","steps":[{"id":"a","skill":"echo","verify":{"type":"expr","expr":"output.x > 1"},"onFail":{"then":"fallback","plan":"q"}}]}`,
		`{"id":"q","name":"Q","domains":["d"],"triggers":["a","b"],"triggerThreshold":2,"steps":[{"id":"a","skill":"echo"}]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		l, err := Decode(doc)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not match ErrInvalid", err)
			}
			return
		}
		for _, tmpl := range l.Plans {
			// With every variable given a value its pattern admits (or its
			// default), the template makes a plan or says why not.
			vars := map[string]string{}
			for name, v := range tmpl.Vars {
				if v.Default == nil {
					vars[name] = "x"
				}
			}
			if _, err := ToPlan(tmpl, vars); err != nil && !errors.Is(err, ErrVars) {
				t.Fatalf("%s: ToPlan error %v does not match ErrVars", tmpl.ID, err)
			}
			// A text holding every trigger matches the template, in its
			// first domain.
			if len(tmpl.Triggers) > 0 {
				text := strings.Join(tmpl.Triggers, " . ")
				found := false
				domain := ""
				if len(tmpl.Domains) > 0 {
					domain = tmpl.Domains[0]
				}
				for _, c := range Match(l, MatchInput{Domain: domain, Text: text}) {
					found = found || c.Template == tmpl
				}
				if !found {
					t.Fatalf("%s: not matched by its own triggers %q", tmpl.ID, text)
				}
			}
		}
	})
}

// FuzzParseToolMeta: any metadata is read or refused with an error, never
// a panic.
func FuzzParseToolMeta(f *testing.F) {
	f.Add([]byte(`{"template":{"id":"t","version":"1","step":"a","index":1,"of":2},"onFail":"skip"}`))
	f.Add([]byte(`{"onFail":{"retries":1,"then":"fallback","step":"f"},"fallback":{"step":"f","onFail":"abort"}}`))
	f.Add([]byte(`{"verify":{"type":"nonEmpty"},"other":1}`))
	f.Fuzz(func(t *testing.T, meta []byte) {
		m, err := ParseToolMeta(meta)
		if err == nil && m != nil && m.OnFail.check() != nil {
			t.Fatalf("accepted an invalid onFail: %+v", m.OnFail)
		}
	})
}

// FuzzGuideTurn: any message, domain and tool output on the starter and
// keyed libraries plays a turn without a panic, and the reply agrees with
// the session's next state.
func FuzzGuideTurn(f *testing.F) {
	f.Add("fix the bug in parser.go", "bugfix", []byte(`{"stdout":"ok  x"}`), 0, true)
	f.Add("Please debug it", "bugfix", []byte(`"Error: boom"`), 1, false)
	f.Add("create branch x, a new branch", "git_ops", []byte(`not json`), -1, true)
	f.Add("", "", []byte(``), 0, false)
	libs := []*Library{starter(f), keyedTestdata(f)}
	f.Fuzz(func(t *testing.T, message, domain string, output []byte, exitCode int, withCode bool) {
		for _, l := range libs {
			var sess GuideSession
			res := []planbus.GuideToolResult{{Tool: "t", Output: output}}
			if withCode {
				res[0].ExitCode = &exitCode
			}
			for turn := range 4 {
				in := GuideInput{Message: message, Domain: domain, Now: t0.Add(time.Duration(turn) * time.Minute)}
				if turn > 0 {
					in.Results = res
				}
				next, r := GuideTurn(l, sess, in)
				active := r.Plan != nil && r.Plan.Status == planbus.GuidePlanActive
				if active != (next.Plan != nil) || active != strings.Contains(r.Context, "← YOU ARE HERE") {
					t.Fatalf("turn %d: reply %+v, next %+v", turn, r, next)
				}
				sess = next
			}
		}
	})
}
