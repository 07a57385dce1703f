package plannercmd_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/cli/plannercmd"
)

const taxi = `
walking-distance(?u,?v) :- weather-is(good), distance(?u,?v,?w), =<(?w, 3).
travel-to(?q) :- if(at(?p), walking-distance(?p, ?q)), do(walk(?p, ?q)).
walk(?here, ?there) :- del(at(?here)), add(at(?there)).
distance(downtown, park, 2).
at(downtown).
weather-is(good).
goals(travel-to(park)).
`

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestHTN(t *testing.T) {
	prog := writeFile(t, "taxi.htn", taxi)
	bad := writeFile(t, "bad.htn", "at(downtown).\ntravel-to(?q) :- if(at(?p), do(walk(?p, ?q)).\n")
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantOut    string
		wantErrSub string
	}{
		{"all plans", []string{"-program", prog, "-goal", "travel-to(park)"}, 0, "[ { (walk(downtown,park)) } ]\n", ""},
		{"goals statement", []string{"-program", prog}, 0, "[ { (walk(downtown,park)) } ]\n", ""},
		{"first plan", []string{"-program", prog, "-goal", "travel-to(park)", "-first"}, 0, "(walk(downtown,park))\n", ""},
		{"facts", []string{"-program", prog, "-goal", "travel-to(park)", "-facts"}, 0,
			"[ { (walk(downtown,park)) } ]\n[ { distance(downtown,park,2) => ,weather-is(good) => ,at(park) =>  } ]\n", ""},
		{"first with facts", []string{"-program", prog, "-goal", "travel-to(park)", "-first", "-facts"}, 0,
			"(walk(downtown,park))\ndistance(downtown,park,2) => ,weather-is(good) => ,at(park) => \n", ""},
		{"query", []string{"-program", prog, "-query", "-goal", "walking-distance(downtown, ?to)"}, 0, "((?to = park))\n", ""},
		{"empty goal list", []string{"-program", prog, "-goal", ""}, 0, "[ { () } ]\n", ""},
		{"write ends its line before the result", []string{"-program", writeFile(t, "w.htn",
			"hello() :- if(write(hi)), do(say(hi)).\nsay(?x) :- del(), add(said(?x)).\n"), "-goal", "hello()", "-first"}, 0,
			"hi\n(say(hi))\n", ""},
		{"no plan", []string{"-program", prog, "-goal", "travel-to(mars)"}, 1, "null\n", "no plan for travel-to(mars)"},
		{"no plan says how far the search got", []string{"-program", prog, "-goal", "travel-to(mars)"}, 1, "null\n",
			"htn: no plan for travel-to(mars): the search got furthest at task travel-to(mars) at depth 1: method travel-to(?q) (line 3) failed its condition at walking-distance(downtown,mars) (goal 2 of its if())\n"},
		{"failed query", []string{"-program", prog, "-query", "-goal", "at(park)"}, 1, "null\n", "has no answer"},
		{"budget", []string{"-program", prog, "-goal", "travel-to(park)", "-budget", "10"}, 1, "", "out of budget"},
		{"program parse error", []string{"-program", bad, "-goal", "x"}, 2, "", "bad.htn:2:45: expected ')' after arguments of \"if\""},
		{"goal parse error", []string{"-program", prog, "-goal", "travel-to(park"}, 2, "", "-goal:1:15: expected ')'"},
		{"missing program", []string{"-goal", "x"}, 2, "", "-program is required"},
		{"unreadable program", []string{"-program", filepath.Join(t.TempDir(), "nope.htn")}, 2, "", "no such file"},
		{"bad flag", []string{"-nope"}, 2, "", "flag provided but not defined"},
		{"extra argument", []string{"-program", prog, "extra"}, 2, "", `unexpected argument "extra"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := runHTN(context.Background(), tc.args, &out, &errOut)
			if code != tc.wantCode {
				t.Errorf("exit code: got %d, want %d (stderr %q)", code, tc.wantCode, errOut.String())
			}
			if out.String() != tc.wantOut {
				t.Errorf("stdout: got %q, want %q", out.String(), tc.wantOut)
			}
			if !strings.Contains(errOut.String(), tc.wantErrSub) {
				t.Errorf("stderr: got %q, want it to contain %q", errOut.String(), tc.wantErrSub)
			}
		})
	}
}

func TestHTNCanceled(t *testing.T) {
	prog := writeFile(t, "loop.htn", "loop(?n) :- if(is(?m, +(?n, 1))), do(loop(?m)).\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut bytes.Buffer
	if code := runHTN(ctx, []string{"-program", prog, "-goal", "loop(0)"}, &out, &errOut); code != 1 {
		t.Fatalf("exit code: got %d, want 1 (stderr %q)", code, errOut.String())
	}
	if !strings.Contains(errOut.String(), "canceled") {
		t.Errorf("stderr: got %q, want a cancellation message", errOut.String())
	}
}

// runHTN runs planner htn with args.
func runHTN(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return plannercmd.Run(ctx, append([]string{"htn"}, args...), cli.IO{Stdin: strings.NewReader(""), Stdout: stdout, Stderr: stderr, Env: os.Getenv})
}

// planner htn plans with an InductorHtn domain and prints what the
// reference engine prints.
func ExampleRun_htn() {
	dir, _ := os.MkdirTemp("", "htn")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "taxi.htn")
	_ = os.WriteFile(path, []byte(taxi), 0o600)
	code := plannercmd.Run(context.Background(), []string{"htn", "-program", path, "-goal", "travel-to(park)"}, cli.OS())
	_ = code
	// Output: [ { (walk(downtown,park)) } ]
}

// -traces prints the search to stderr, the plan staying alone on stdout;
// -trace-limit bounds it.
func TestHTNTraces(t *testing.T) {
	prog := writeFile(t, "taxi.htn", taxi)
	tests := []struct {
		name    string
		args    []string
		code    int
		wantOut string
		wantErr string
	}{
		{"plan", []string{"-program", prog, "-traces"}, 0, "[ { (walk(downtown,park)) } ]\n", `trace [1] task travel-to(park)
trace [1] method travel-to(?q) (line 3) for travel-to(park): 1 answer
trace [2] task walk(downtown,park)
trace [2] operator walk(downtown,park)
trace [3] plan 1
`},
		{"no plan", []string{"-program", prog, "-goal", "travel-to(mars)", "-traces"}, 1, "null\n", `trace [1] task travel-to(mars)
trace [1] method travel-to(?q) (line 3) for travel-to(mars): no answer: its condition failed at walking-distance(downtown,mars) (goal 2 of its if())
trace [1] fail travel-to(mars): no method led to a plan
htn: no plan for travel-to(mars): the search got furthest at task travel-to(mars) at depth 1: method travel-to(?q) (line 3) failed its condition at walking-distance(downtown,mars) (goal 2 of its if())
`},
		{"limit", []string{"-program", prog, "-traces", "-trace-limit", "2"}, 0, "[ { (walk(downtown,park)) } ]\n", `trace [1] task travel-to(park)
trace [1] method travel-to(?q) (line 3) for travel-to(park): 1 answer
trace: 3 more events not kept (-trace-limit)
`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := runHTN(context.Background(), tc.args, &out, &errOut); code != tc.code {
				t.Errorf("exit code: got %d, want %d", code, tc.code)
			}
			if out.String() != tc.wantOut {
				t.Errorf("stdout: got %q, want %q", out.String(), tc.wantOut)
			}
			if errOut.String() != tc.wantErr {
				t.Errorf("stderr: got\n%s\nwant\n%s", errOut.String(), tc.wantErr)
			}
		})
	}
}
