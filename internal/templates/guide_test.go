package templates

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/schemas"
)

// turn is one scripted turn of a guided session: a message and domain,
// and tool outputs ("" for none).
type turn struct {
	message, domain string
	outputs         []string // JSON outputs, oldest first
	exitCode        *int
}

func say(domain, message string) turn { return turn{message: message, domain: domain} }

func ran(outputs ...string) turn { return turn{outputs: outputs} }

func exited(code int, output string) turn { return turn{outputs: []string{output}, exitCode: &code} }

// play runs turns through GuideTurn from an empty session and records
// each reply; it checks what every reply must hold.
func play(t *testing.T, l *Library, turns []turn) (string, []planbus.GuideReply) {
	t.Helper()
	var sess GuideSession
	var b strings.Builder
	var replies []planbus.GuideReply
	for i, tu := range turns {
		in := GuideInput{Message: tu.message, Domain: tu.domain, Now: t0.Add(time.Duration(i) * time.Minute)}
		for _, o := range tu.outputs {
			in.Results = append(in.Results, planbus.GuideToolResult{Tool: "code_execution_tool", Output: json.RawMessage(o), ExitCode: tu.exitCode})
		}
		// The session goes through JSON between turns, as it does in KV.
		doc, err := json.Marshal(sess)
		if err != nil {
			t.Fatal(err)
		}
		var back GuideSession
		if err := json.Unmarshal(doc, &back); err != nil {
			t.Fatal(err)
		}
		next, reply := GuideTurn(l, back, in)
		checkReply(t, i+1, next, reply)
		sess = next
		replies = append(replies, reply)
		fmt.Fprintf(&b, "== turn %d", i+1)
		if tu.message != "" {
			fmt.Fprintf(&b, " %q", tu.message)
		}
		if tu.domain != "" {
			fmt.Fprintf(&b, " domain=%s", tu.domain)
		}
		for _, o := range tu.outputs {
			fmt.Fprintf(&b, " output=%s", o)
		}
		if tu.exitCode != nil {
			fmt.Fprintf(&b, " exitCode=%d", *tu.exitCode)
		}
		if e := reply.Ended; e != nil {
			fmt.Fprintf(&b, "\n-> %s: %s", e.Transition, e.Message)
		}
		fmt.Fprintf(&b, "\n-> %s: %s\n", reply.Transition, reply.Message)
		if c := reply.Check; c != nil {
			fmt.Fprintf(&b, "check: step %d passed=%v action=%s: %s\n", c.Step, c.Passed, c.Action, c.Reason)
		}
		if p := reply.Plan; p != nil {
			var steps []string
			for _, s := range p.Steps {
				steps = append(steps, s.Status)
			}
			fmt.Fprintf(&b, "plan: %s %s step %d of %d, turns %d/%d: %s\n", p.ID, p.Status, p.Step, p.Of, p.TurnsSinceProgress, p.StaleAfterTurns, strings.Join(steps, " "))
		}
		if reply.Context != "" {
			fmt.Fprintf(&b, "%s\n", reply.Context)
		}
		b.WriteByte('\n')
	}
	return b.String(), replies
}

// checkReply asserts what holds of every reply.
func checkReply(t *testing.T, n int, next GuideSession, r planbus.GuideReply) {
	t.Helper()
	r.SessionID = "s1"
	if doc, _ := json.Marshal(r); schemas.Validate(schemas.GuideReply, doc) != nil {
		t.Errorf("turn %d: reply %s breaks its schema: %v", n, doc, schemas.Validate(schemas.GuideReply, doc))
	}
	if e := r.Ended; e != nil && (r.Transition != planbus.GuideActivated || e.Plan != nil && e.Plan.Status == planbus.GuidePlanActive) {
		t.Errorf("turn %d: ended %+v, then %s", n, e, r.Transition)
	}
	active := r.Plan != nil && r.Plan.Status == planbus.GuidePlanActive
	if active != (next.Plan != nil) {
		t.Errorf("turn %d: plan %+v, but the session keeps %+v", n, r.Plan, next.Plan)
	}
	if active != strings.Contains(r.Context, "← YOU ARE HERE") {
		t.Errorf("turn %d: active %v, context:\n%s", n, active, r.Context)
	}
	if r.Transition != planbus.GuideNone && r.Message == "" {
		t.Errorf("turn %d: %s without a message", n, r.Transition)
	}
	if r.Plan == nil && r.Context != "" && r.Transition != planbus.GuideAborted {
		t.Errorf("turn %d: context without a plan:\n%s", n, r.Context)
	}
	if active {
		cur := 0
		for _, s := range r.Plan.Steps {
			if s.Status == planbus.GuideStepCurrent {
				cur = s.Index
			}
		}
		if cur != r.Plan.Step || !strings.Contains(r.Context, fmt.Sprintf("INSTRUCTION: Execute Step %d now.", cur)) {
			t.Errorf("turn %d: step %d, current %d, context:\n%s", n, r.Plan.Step, cur, r.Context)
		}
	}
}

func TestGuideGolden(t *testing.T) {
	starterLib, keyedLib := starter(t), keyedTestdata(t)
	shell := func(stdout string) string {
		b, _ := json.Marshal(map[string]any{"stdout": stdout, "stderr": ""})
		return string(b)
	}
	scenarios := []struct {
		name  string
		lib   *Library
		turns []turn
	}{
		// The starter bugfix plan: warn and block keep the step,
		// whatever the number of attempts; the right output moves on.
		{"starter_bugfix", starterLib, []turn{
			say("bugfix", "fix the bug in parser.go"),
			ran(`"--- FAIL: TestParse (0.00s)\n    parser_test.go:12: got 1, want 2"`),
			ran(shell("")),
			ran(shell("parser_test.go:9:func TestParse(t *testing.T) {")),
			exited(1, shell("")),
			exited(0, shell("Applied patch parser.go cleanly.")),
			ran(shell("--- FAIL: TestParse (0.00s)\nFAIL\n")),
			ran(shell("--- FAIL: TestParse (0.00s)\nFAIL\n")),
			say("", "is it fixed yet?"),
			ran(shell("ok  \texample.com/parser\t0.01s\n")),
			ran(shell("ok  \texample.com/parser\t0.02s\n")),
		}},
		// The keyed bugfix plan: any_output, warn with an empty output,
		// output_not_contains blocking, and a last step that is optional
		// in a plan but still checked in a session.
		{"keyed_bugfix", keyedLib, []turn{
			say("bugfix", "The parser is broken, please debug it"),
			ran(`""`),
			ran(`"panic: index out of range [3] with length 3"`),
			ran(`"parser.go:42 reads tokens[i+1] past the end"`),
			ran(`"edited parser.go"`),
			ran(`"Error: still failing"`),
			ran(`"PASS"`),
			ran(`"   "`),
			ran(`"ok  all 42 tests"`),
		}},
		// The keyed feature branch: two triggers needed; the last result
		// of a turn is the one checked; exit codes; retry, then abort.
		{"keyed_branch_retry_abort", keyedLib, []turn{
			say("git_ops", "create branch please"),
			say("git_ops", "create branch login as a new branch"),
			ran(`"HEAD detached at 1a2b3c"`, `"On branch main\nnothing to commit"`),
			ran(`"Switched to a new branch 'feature/login'"`),
			ran(`"I edited login.go"`),
			ran(`"[feature/login 1a2b3c4] Add login"`),
			exited(128, `"fatal: could not read Username"`),
			exited(128, `"fatal: could not read Username"`),
			exited(128, `"fatal: could not read Username"`),
			say("git_ops", "create a new branch, a feature branch"),
		}},
		// abort at once; file_exists is the agent's word; skip.
		{"keyed_docker", keyedLib, []turn{
			say("docker_ops", "docker build the image and deploy container"),
			ran(`"cat: Dockerfile: No such file or directory"`),
			say("docker_ops", "docker build the image and deploy container"),
			ran(`"FROM alpine"`),
			ran(`"Successfully built 1a2b3c"`),
			ran(`"saved"`),
			ran(`"curl: (7) error connecting"`),
			ran(`"hello"`),
		}},
		// A turn whose result completes the plan goes on to match its
		// message, which starts the next plan at once; the next turn's
		// result is checked against that plan.
		{"keyed_chain", keyedLib, []turn{
			say("bugfix", "The parser is broken, please debug it"),
			ran(`"panic: index out of range"`),
			ran(`"parser.go:42 reads past the end"`),
			ran(`"edited parser.go"`),
			ran(`"PASS"`),
			{message: "fixed! now create a new branch, a feature branch", domain: "git_ops", outputs: []string{`"ok  all 42 tests"`}},
			ran(`"On branch main"`),
		}},
		// No plan matches small talk, nor a plan that lists domains
		// without a domain; an empty message matches nothing.
		{"no_match", starterLib, []turn{
			say("conversational", "What's the weather like?"),
			say("", "fix the bug in parser.go"),
			ran(`"output without a plan"`),
		}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			text, _ := play(t, sc.lib, sc.turns)
			golden(t, filepath.Join("guide", sc.name+".txt"), []byte(text))
		})
	}
}

// The activation context, exactly: the format an agent's prompt gets.
func TestGuideActivationContext(t *testing.T) {
	_, replies := play(t, starter(t), []turn{say("bugfix", "fix the bug in parser.go")})
	r := replies[0]
	want := `[ACTIVE PLAN: bugfix_workflow]
Step 1 of 5: Reproduce the bug ← YOU ARE HERE
  Action: Run <test>; a failure here is the bug reproduced, and the plan goes on
  Tool: shell
  Command hint: go test -count=1 -run '<test>' ./...
Step 2 of 5: Find the test [PENDING]
Step 3 of 5: Apply the fix [PENDING]
Step 4 of 5: Test the fix [PENDING]
Step 5 of 5: Check for regressions [PENDING]

TO FILL IN: the request did not give these; put the values in place of the placeholders above:
  <test>: the failing test, as go test -run takes it

INSTRUCTION: Execute Step 1 now. Do not skip ahead. Verify the result before proceeding.`
	if r.Transition != planbus.GuideActivated || r.Context != want {
		t.Errorf("%s, context:\n%s\nwant:\n%s", r.Transition, r.Context, want)
	}
	// A message that names the test fills the placeholder in, and
	// nothing is left to fill.
	_, replies = play(t, starter(t), []turn{say("bugfix", "fix the bug: TestParseEmpty fails in ./parser")})
	if c := replies[0].Context; !strings.Contains(c, "Run TestParseEmpty;") || !strings.Contains(c, "-run TestParseEmpty ./parser") || strings.Contains(c, "TO FILL IN") {
		t.Errorf("with the test named, context:\n%s", c)
	}
	if r.Message != "Plan activated: Bug fix (Go) (5 steps)" {
		t.Errorf("message %q", r.Message)
	}
}

// A plan expires once more than stale_after_turns turns pass without
// progress: turn n+1 after the last progress, not turn n.
func TestGuideExpires(t *testing.T) {
	l := keyedTestdata(t)
	turns := []turn{say("git_ops", "create branch login as a new branch")}
	for range 10 { // stale_after_turns 10
		turns = append(turns, say("git_ops", "what about lunch?"))
	}
	_, replies := play(t, l, turns)
	last := replies[len(replies)-1]
	if last.Transition != planbus.GuideNone || last.Plan.TurnsSinceProgress != 10 {
		t.Fatalf("after 10 turns: %s, %d turns", last.Transition, last.Plan.TurnsSinceProgress)
	}
	turns = append(turns, say("git_ops", "still there?"))
	_, replies = play(t, l, turns)
	last = replies[len(replies)-1]
	if last.Transition != planbus.GuideExpired || last.Plan.Status != planbus.GuidePlanExpired ||
		last.Message != "Plan 'Git Feature Branch' expired (no progress in 11 turns, stale after 10)" {
		t.Errorf("after 11 turns: %s %+v %q", last.Transition, last.Plan, last.Message)
	}
	// Progress resets the count.
	turns = []turn{say("git_ops", "create branch login as a new branch")}
	for range 9 {
		turns = append(turns, say("", ""))
	}
	turns = append(turns, ran(`"On branch main"`))
	for range 10 {
		turns = append(turns, say("", ""))
	}
	_, replies = play(t, l, turns)
	if last := replies[len(replies)-1]; last.Transition != planbus.GuideNone || last.Plan.Step != 2 || last.Plan.TurnsSinceProgress != 10 {
		t.Errorf("10 turns after progress: %s %+v", last.Transition, last.Plan)
	}
}

// A session whose plan left the library, or changed, drops it.
func TestGuideLibraryChanged(t *testing.T) {
	old := keyedTestdata(t)
	sess, _ := GuideTurn(old, GuideSession{}, GuideInput{Domain: "bugfix", Message: "debug it", Now: t0})
	if sess.Plan == nil {
		t.Fatal("no plan activated")
	}
	changed := mustDecode(t, []byte(`{"_meta":{"version":"1.0"},"plans":{"bugfix_workflow":{"name":"B","domains":["bugfix"],"triggers":["debug"],
		"trigger_threshold":1,"steps":[{"name":"Only","tool":"t"}]}}}`))
	for name, l := range map[string]*Library{"changed": changed, "gone": mustDecode(t, lib(`{"id":"x","name":"X","steps":[{"id":"s","skill":"echo"}]}`))} {
		next, r := GuideTurn(l, sess, GuideInput{Now: t0})
		if next.Plan != nil || r.Transition != planbus.GuideAborted || !strings.Contains(r.Context, "[PLAN ABORTED: bugfix_workflow]") {
			t.Errorf("%s: %+v %+v", name, next, r)
		}
	}
}

// chainLib has two one-step plans: one aborts at once on a failed check
// and expires after one turn without progress.
const chainLib = `{"plans": {
  "one": {"name": "One", "domains": ["d"], "triggers": ["alpha"], "trigger_threshold": 1, "stale_after_turns": 1,
    "steps": [{"name": "S1", "tool": "t", "verify": {"type": "output_contains", "value": "ok"}, "on_fail": "abort"}]},
  "two": {"name": "Two", "domains": ["d"], "triggers": ["beta"], "trigger_threshold": 1,
    "steps": [{"name": "T1", "tool": "t"}]}
}}`

// A turn that ends the active plan goes on to match its message, as a turn
// without a plan does (the seed's selector): the message may start the
// next plan at once. A turn that does not end the plan does not.
func TestGuideTurnThatEndsAPlanMatchesItsMessage(t *testing.T) {
	lib, err := Decode([]byte(chainLib))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		turns []turn // after "alpha" activated plan one
		plan  string // the active plan after the last turn, "" for none
		want  string // the last reply: ended transition, then transition
	}{
		{"completed", []turn{{message: "beta", domain: "d", outputs: []string{`"ok"`}}}, "two", "completed activated"},
		{"aborted", []turn{{message: "beta", domain: "d", outputs: []string{`"bad"`}}}, "two", "aborted activated"},
		{"expired", []turn{say("d", "hello"), say("d", "beta")}, "two", "expired activated"},
		{"aborted, the same plan again", []turn{{message: "alpha", domain: "d", outputs: []string{`"bad"`}}}, "one", "aborted activated"},
		{"completed, no match", []turn{{message: "gamma", domain: "d", outputs: []string{`"ok"`}}}, "", "completed"},
		{"completed, no message", []turn{ran(`"ok"`)}, "", "completed"},
		{"completed, another domain", []turn{{message: "beta", domain: "e", outputs: []string{`"ok"`}}}, "", "completed"},
		{"not ended", []turn{say("d", "beta")}, "one", "none"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, replies := play(t, lib, append([]turn{say("d", "alpha")}, tc.turns...))
			last := replies[len(replies)-1]
			got := last.Transition
			if last.Ended != nil {
				got = last.Ended.Transition + " " + got
				if last.Ended.Plan == nil || last.Ended.Plan.ID != "one" || !strings.Contains(last.Context, "[ACTIVE PLAN: "+tc.plan+"]") {
					t.Errorf("ended %+v, context:\n%s", last.Ended, last.Context)
				}
			}
			if got != tc.want {
				t.Errorf("last turn: %s, want %s", got, tc.want)
			}
			active := ""
			if last.Plan != nil && last.Plan.Status == planbus.GuidePlanActive {
				active = last.Plan.ID
			}
			if active != tc.plan {
				t.Errorf("active plan %q, want %q", active, tc.plan)
			}
		})
	}
}

// warn and block are different transitions: warn lets the session go on
// with a warning, block holds the plan.
func TestGuideWarnAndBlockDiffer(t *testing.T) {
	lib, err := Decode([]byte(`{"plans": {"p": {"name": "P", "triggers": ["go"], "trigger_threshold": 1, "steps": [
		{"name": "W", "tool": "t", "verify": {"type": "output_contains", "value": "ok"}, "on_fail": "warn"},
		{"name": "B", "tool": "t", "verify": {"type": "output_contains", "value": "ok"}, "on_fail": "block"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, replies := play(t, lib, []turn{say("", "go"), ran(`"bad"`), ran(`"ok"`), ran(`"bad"`)})
	for _, tc := range []struct {
		turn       int
		transition string
		action     string
		note       string
	}{
		{2, planbus.GuideWarned, "warn", "WARNING: Step 1 failed verification: output does not contain \"ok\". Retry it."},
		{4, planbus.GuideBlocked, "block", "Step 2 failed verification: output does not contain \"ok\". It blocks the plan: do not go on until it passes."},
	} {
		r := replies[tc.turn-1]
		if r.Transition != tc.transition || r.Check == nil || r.Check.Action != tc.action || !strings.Contains(r.Context, tc.note) {
			t.Errorf("turn %d: %s, check %+v; want %s, action %s, context with %q:\n%s", tc.turn, r.Transition, r.Check, tc.transition, tc.action, tc.note, r.Context)
		}
	}
}
