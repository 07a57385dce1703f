package mcpskills

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/skill"
)

type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type addOut struct {
	Sum float64 `json:"sum"`
}

type waitIn struct {
	Ms int `json:"ms"`
}

// testServer is an MCP server of a few tools; started counts its
// sessions, and waiting is told when a wait call begins.
type testServer struct {
	srv     *mcp.Server
	mu      sync.Mutex
	started int
	last    *recorded
	waiting chan struct{}
}

func newTestServer() *testServer {
	ts := &testServer{waiting: make(chan struct{}, 8)}
	s := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Adds.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "refuse", Description: "Fails."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Reason string `json:"reason"`
		}) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("refused: " + in.Reason)
		})
	s.AddTool(&mcp.Tool{Name: "hello", Title: "Says hello", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello"}, &mcp.TextContent{Text: "world"}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "not.a.skill", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "wait", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest, in waitIn) (*mcp.CallToolResult, any, error) {
			ts.waiting <- struct{}{}
			select {
			case <-time.After(time.Duration(in.Ms) * time.Millisecond):
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return nil, map[string]int{"waited": in.Ms}, nil
		})
	ts.srv = s
	return ts
}

// transport connects a new session of the server: what starting the
// process again is for a stdio server.
func (ts *testServer) transport(t *testing.T) func() mcp.Transport {
	return func() mcp.Transport {
		st, ct := mcp.NewInMemoryTransports()
		if _, err := ts.srv.Connect(context.Background(), st, nil); err != nil {
			t.Error(err)
		}
		r := &recorded{Transport: ct}
		ts.mu.Lock()
		ts.started++
		ts.last = r
		ts.mu.Unlock()
		return r
	}
}

// recorded keeps the client's end of the connection, to break it.
type recorded struct {
	mcp.Transport
	conn mcp.Connection
}

func (r *recorded) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := r.Transport.Connect(ctx)
	r.conn = c
	return c, err
}

// kill breaks the current connection, as a server process that dies
// breaks its pipes.
func (ts *testServer) kill() {
	ts.mu.Lock()
	r := ts.last
	ts.mu.Unlock()
	_ = r.conn.Close()
}

func open(t *testing.T, ts *testServer) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Open(ctx, Spec{Name: "ex", Command: []string{"in-memory"}}, Options{transport: ts.transport(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func skillNamed(t *testing.T, s *Server, name string) skill.Skill {
	t.Helper()
	for _, sk := range s.Skills() {
		if sk.Manifest.Name == name {
			return sk
		}
	}
	t.Fatalf("no skill %s among %d", name, len(s.Skills()))
	return skill.Skill{}
}

func call(t *testing.T, sk skill.Skill, input string) (skill.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return sk.Handler.Handle(ctx, &skill.Call{Skill: sk.Manifest.Name, Input: json.RawMessage(input), Attempt: 1, MaxAttempts: 1})
}

func TestToolsBecomeSkills(t *testing.T) {
	s := open(t, newTestServer())
	var names []string
	for _, sk := range s.Skills() {
		names = append(names, sk.Manifest.Name)
	}
	if got := strings.Join(names, ","); got != "ex.add,ex.hello,ex.refuse,ex.wait" {
		t.Errorf("skills %s, want ex.add,ex.hello,ex.refuse,ex.wait (not.a.skill left out)", got)
	}
	add := skillNamed(t, s, "ex.add").Manifest
	if !add.ReadOnly || !add.Idempotent || add.RetryPolicy != nil || add.Description != "Adds." {
		t.Errorf("ex.add's manifest %+v: want read-only, idempotent, the default retries, its description", add)
	}
	if !strings.Contains(string(add.InputSchema), `"a"`) || !strings.Contains(string(add.OutputSchema), `"sum"`) {
		t.Errorf("ex.add's schemas: input %s, output %s", add.InputSchema, add.OutputSchema)
	}
	refuse := skillNamed(t, s, "ex.refuse").Manifest
	if refuse.ReadOnly || refuse.Idempotent || refuse.RetryPolicy == nil || refuse.RetryPolicy.MaxAttempts != 1 {
		t.Errorf("ex.refuse's manifest %+v: neither hint, so one attempt by default", refuse)
	}
	if d := skillNamed(t, s, "ex.hello").Manifest.Description; d != "Says hello" {
		t.Errorf("ex.hello's description %q: want its title", d)
	}
}

func TestCallsAndTheirErrors(t *testing.T) {
	s := open(t, newTestServer())
	res, err := call(t, skillNamed(t, s, "ex.add"), `{"a":2,"b":3}`)
	if err != nil || string(res.Output) != `{"sum":5}` {
		t.Errorf("ex.add: %s, %v; want {\"sum\":5}", res.Output, err)
	}
	res, err = call(t, skillNamed(t, s, "ex.hello"), ``)
	if err != nil || string(res.Output) != `{"text":"hello\nworld"}` {
		t.Errorf("ex.hello: %s, %v; want its text", res.Output, err)
	}
	_, err = call(t, skillNamed(t, s, "ex.refuse"), `{"reason":"not today"}`)
	var se *skill.Error
	if !errors.As(err, &se) || se.Code != planbus.CodeMCPToolError || se.Category != planbus.CategoryPermanent || se.Message != "refused: not today" {
		t.Errorf("ex.refuse: %v; want MCP_TOOL_ERROR (permanent) with the tool's text", err)
	}
}

func TestALostServerIsConnectedAgain(t *testing.T) {
	ts := newTestServer()
	s := open(t, ts)
	wait := skillNamed(t, s, "ex.wait")

	// A call in flight when the server goes fails as a network error...
	errs := make(chan error, 1)
	go func() {
		_, err := call(t, wait, `{"ms":60000}`)
		errs <- err
	}()
	select {
	case <-ts.waiting:
	case <-time.After(time.Minute):
		t.Fatal("the wait call did not reach the server")
	}
	ts.kill()
	var se *skill.Error
	if err := <-errs; !errors.As(err, &se) || se.Code != planbus.CodeMCPUnavailable || se.Category != planbus.CategoryNetwork {
		t.Fatalf("the call in flight: %v; want MCP_UNAVAILABLE (network)", err)
	}
	// ...the worker starts the server again (a call made before it has
	// seen the loss fails as the one in flight did, and is retried by
	// its policy)...
	bustest.Eventually(t, time.Minute, "the server started again", func() (bool, string) {
		ts.mu.Lock()
		started := ts.started
		ts.mu.Unlock()
		s.mu.Lock()
		up := s.cs != nil
		s.mu.Unlock()
		return started == 2 && up, fmt.Sprintf("started %d times, connected %v", started, up)
	})
	// ...and the next call finds it back.
	res, err := call(t, wait, `{"ms":1}`)
	if err != nil || string(res.Output) != `{"waited":1}` {
		t.Fatalf("after the loss: %s, %v", res.Output, err)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.started != 2 {
		t.Errorf("the server was started %d times, want 2", ts.started)
	}
}

func TestParseSpec(t *testing.T) {
	for in, want := range map[string]Spec{
		"demo=./mcp-server -v":            {Name: "demo", Command: []string{"./mcp-server", "-v"}},
		"gh=https://example.com/mcp":      {Name: "gh", URL: "https://example.com/mcp"},
		"local_1=http://127.0.0.1:9/mcp ": {Name: "local_1", URL: "http://127.0.0.1:9/mcp"},
	} {
		got, err := ParseSpec(in)
		if err != nil || got.Name != want.Name || got.URL != want.URL || strings.Join(got.Command, "|") != strings.Join(want.Command, "|") {
			t.Errorf("ParseSpec(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"demo":             "want NAME=COMMAND",
		"demo=":            "want NAME=COMMAND",
		"a.b=./x":          `the name "a.b" must be`,
		"=./x":             `the name "" must be`,
		"web=https:///mcp": "is not a URL",
	} {
		if _, err := ParseSpec(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSpec(%q): %v; want an error saying %q", in, err, want)
		}
	}
}

func TestPrefixLines(t *testing.T) {
	var b strings.Builder
	w := PrefixLines(&b, "mcp demo: ")
	for _, part := range []string{"one\ntw", "o\n", "three"} {
		if _, err := w.Write([]byte(part)); err != nil {
			t.Fatal(err)
		}
	}
	if want := "mcp demo: one\nmcp demo: two\n"; b.String() != want {
		t.Errorf("wrote %q, want %q (an unfinished line held back)", b.String(), want)
	}
	b.Reset()
	if _, err := w.Write([]byte(strings.Repeat("x", maxLine+10))); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(b.String(), "\n"); len(lines) != 2 || len(lines[0]) != len("mcp demo: ")+maxLine {
		t.Errorf("a long line: %d lines, the first %d bytes", len(lines), len(lines[0]))
	}
}

// A server on streamable HTTP, reached with its bearer token; without the
// token it is not served.
func TestAServerOnHTTP(t *testing.T) {
	ts := newTestServer()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ts.srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Open(ctx, Spec{Name: "web", URL: hs.URL, Token: "s3cret"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := call(t, skillNamed(t, s, "web.add"), `{"a":1,"b":2}`)
	if err != nil || string(res.Output) != `{"sum":3}` {
		t.Errorf("web.add: %s, %v", res.Output, err)
	}
	if _, err := Open(ctx, Spec{Name: "web", URL: hs.URL, Token: "wrong"}, Options{}); err == nil || !strings.Contains(err.Error(), "mcp server web ("+hs.URL+")") {
		t.Errorf("with a wrong token: %v; want an error naming the server", err)
	}
}
