package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/planner"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/internal/templates"
	"github.com/planbus/planbus/worker"
)

// startGuidedNode starts a node on a private embedded server: planner
// (with the starter template library), dispatcher and a worker of the
// built-in skills. It returns the server's URL.
func startGuidedNode(t *testing.T) string {
	t.Helper()
	lib, err := templates.ReadFile(filepath.Join(bustest.RepoRoot(t), "examples", "templates", "library.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := bustest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	n, err := node.Start(ctx, node.Config{Bus: cfg, Workers: 1, Planner: planner.Config{Templates: lib},
		Worker: worker.Config{Skills: skills.Builtins(skills.BuiltinConfig{}), DrainTimeout: time.Second}}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	return cfg.URL
}

// mcpThreeTools is a plan of three tools, the last joining the others.
const mcpThreeTools = `{"planId":"mcp-three","tools":[
	{"toolId":"A","skill":"echo","input":{"city":"Lisbon"}},
	{"toolId":"B","skill":"echo","input":{"city":"Porto"}},
	{"toolId":"C","skill":"echo","dependencies":["A","B"],"input":{"from":[{"$ref":"A#/city"},{"$ref":"B#/city"}]}}]}`

// exerciseMCP lists the tools of the planbus MCP server on cs, runs a
// three-tool plan to success through run_plan (with progress
// notifications), takes a guided turn and checks that a refused plan is
// a tool error naming its code.
func exerciseMCP(t *testing.T, ctx context.Context, cs *mcp.ClientSession, progress *progressLog) {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
		if tool.InputSchema == nil || tool.OutputSchema == nil {
			t.Errorf("tool %s: input schema %v, output schema %v: want both", tool.Name, tool.InputSchema != nil, tool.OutputSchema != nil)
		}
	}
	slices.Sort(names)
	want := []string{"agent_start", "agent_status", "approve", "cancel", "guide_turn", "list_skills", "run_plan", "status", "submit_request"}
	if !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}

	var plan map[string]any
	if err := json.Unmarshal([]byte(mcpThreeTools), &plan); err != nil {
		t.Fatal(err)
	}
	params := &mcp.CallToolParams{Name: "run_plan", Arguments: map[string]any{"plan": plan}}
	params.SetProgressToken("run-1")
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	var run struct {
		Status  string         `json:"status"`
		Success bool           `json:"success"`
		Outcome map[string]any `json:"outcome"`
	}
	structured(t, res, &run)
	if res.IsError || !run.Success || run.Status != "succeeded" {
		t.Fatalf("run_plan: error %v, %+v", res.IsError, run)
	}
	exec, _ := run.Outcome["execution"].(map[string]any)
	if tools, _ := exec["tools"].([]any); len(tools) != 3 {
		t.Errorf("the outcome's execution lists %d tools, want 3: %v", len(tools), run.Outcome)
	}
	if got := progress.messages(); !slices.ContainsFunc(got, func(m string) bool { return strings.HasPrefix(m, "tool.succeeded C") }) {
		t.Errorf("progress notifications %q: want one for tool C's success", got)
	}

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "guide_turn", Arguments: map[string]any{
		"sessionId": "mcp-guided", "domain": "bugfix", "message": "fix the bug in parser.go"}})
	if err != nil {
		t.Fatal(err)
	}
	var turn struct {
		Transition string `json:"transition"`
		Context    string `json:"context"`
	}
	structured(t, res, &turn)
	if res.IsError || turn.Transition != "activated" || !strings.HasPrefix(turn.Context, "[ACTIVE PLAN: bugfix_workflow]\nStep 1 of 5: Reproduce the bug ← YOU ARE HERE\n") {
		t.Fatalf("guide_turn: error %v, %+v", res.IsError, turn)
	}

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_plan", Arguments: map[string]any{
		"plan": map[string]any{"planId": "mcp-bad", "tools": []any{map[string]any{"toolId": "A", "skill": "no-such-skill"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.HasPrefix(text(res), "INVALID_REQUEST: ") || !strings.Contains(text(res), "no-such-skill") {
		t.Errorf("a plan on an unknown skill: error %v, %q; want a tool error led by INVALID_REQUEST naming the skill", res.IsError, text(res))
	}
}

// structured decodes a tool result's structured content into v.
func structured(t *testing.T, res *mcp.CallToolResult, v any) {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("structured content %s: %v (text %q)", b, err, text(res))
	}
}

// text is a tool result's text content.
func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// progressLog keeps the messages of the progress notifications received.
type progressLog struct {
	mu   sync.Mutex
	msgs []string
}

func (p *progressLog) add(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.msgs = append(p.msgs, req.Params.Message)
}

func (p *progressLog) messages() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.msgs)
}

func newMCPClient(progress *progressLog) *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "planbus-test", Version: "0"}, &mcp.ClientOptions{ProgressNotificationHandler: progress.add})
}

// planner mcp as an MCP client starts it: a process speaking MCP on its
// stdin and stdout, driven by the Go SDK's client.
func TestPlannerMCPOverStdio(t *testing.T) {
	bin := buildPlanner(t)
	url := startGuidedNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cmd := exec.Command(bin, "mcp", "--nats-url", url)
	cmd.Env = processEnv(t)
	var stderr bustest.SyncBuffer
	cmd.Stderr = &stderr
	progress := &progressLog{}
	cs, err := newMCPClient(progress).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v; stderr:\n%s", err, stderr.String())
	}
	defer cs.Close()
	exerciseMCP(t, ctx, cs, progress)
	if t.Failed() {
		t.Logf("planner mcp's stderr:\n%s", stderr.String())
	}
}

// bearerTransport adds a bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// planner mcp --listen serves streamable HTTP to clients with its bearer
// token, and refuses those without it.
func TestPlannerMCPOverHTTP(t *testing.T) {
	bin := buildPlanner(t)
	url := startGuidedNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	const token = "s3cret-token-for-the-test"
	cmd := exec.Command(bin, "mcp", "--nats-url", url, "--listen", "127.0.0.1:0")
	cmd.Env = append(processEnv(t), "PLANBUS_MCP_TOKEN="+token)
	endpoint, log := startWatched(t, cmd, "planner mcp --listen", func(line string) (string, bool) {
		i := strings.Index(line, "url=http://")
		if i < 0 || !strings.Contains(line, "serving MCP") {
			return "", false
		}
		return strings.Fields(line[i+len("url="):])[0], true
	})

	// Without the token: refused before any MCP.
	if _, err := mcp.NewClient(&mcp.Implementation{Name: "no-token", Version: "0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1}, nil); err == nil {
		t.Fatal("a client without the bearer token connected")
	}
	resp, err := http.Post(endpoint, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a request without the token: %s, want 401", resp.Status)
	}

	progress := &progressLog{}
	cs, err := newMCPClient(progress).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint,
		HTTPClient: &http.Client{Transport: bearerTransport{token}}}, nil)
	if err != nil {
		t.Fatalf("connect with the token: %v; stderr:\n%s", err, log.String())
	}
	defer cs.Close()
	exerciseMCP(t, ctx, cs, progress)
}
