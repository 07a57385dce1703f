// Package mcpskills serves the tools of Model Context Protocol servers as
// planbus skills (toolworker --mcp): every tool of a server named NAME is
// the skill NAME.TOOL, its manifest made from the tool's input and output
// schemas and annotations.
//
// A server is a process the worker starts and speaks MCP with on its
// stdin and stdout, or an endpoint of the streamable HTTP transport. One
// session serves every call; when it is lost (the process died, the
// endpoint forgot the session) the worker connects again, starting the
// process anew, with a backoff. A call that was in flight fails with
// MCP_UNAVAILABLE (category network), so the dispatcher retries it by its
// policy; a tool's isError result fails the call with MCP_TOOL_ERROR
// (category permanent) and the tool's text.
package mcpskills

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/wire"
	"github.com/planbus/planbus/skill"
)

// Spec says which MCP server to serve: a command (stdio) or a URL
// (streamable HTTP), under the namespace Name.
type Spec struct {
	// Name is the namespace of the server's skills, NAME in NAME.TOOL.
	Name string
	// Command is the program and its arguments, for a server on stdio.
	Command []string
	// URL is the endpoint of a server on streamable HTTP.
	URL string
	// Token, if set, is sent to URL as a bearer token.
	Token string
}

// ParseSpec reads NAME=COMMAND [ARGS] (the command split at spaces, no
// quoting) or NAME=http(s)://HOST/PATH.
func ParseSpec(s string) (Spec, error) {
	name, rest, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(rest) == "" {
		return Spec{}, fmt.Errorf("%q: want NAME=COMMAND [ARGS] or NAME=https://HOST/PATH", s)
	}
	if !wire.IsName(name) {
		return Spec{}, fmt.Errorf("%q: the name %q must be 1 to 64 letters, digits, '_' or '-' (its tools are served as %s.TOOL)", s, name, name)
	}
	rest = strings.TrimSpace(rest)
	if strings.HasPrefix(rest, "http://") || strings.HasPrefix(rest, "https://") {
		u, err := url.Parse(rest)
		if err != nil || u.Host == "" {
			return Spec{}, fmt.Errorf("%q: %q is not a URL like https://HOST/mcp", s, rest)
		}
		return Spec{Name: name, URL: rest}, nil
	}
	return Spec{Name: name, Command: strings.Fields(rest)}, nil
}

// Where says where the server is: its URL or its command line.
func (s Spec) Where() string {
	if s.URL != "" {
		return s.URL
	}
	return strings.Join(s.Command, " ")
}

// Options are what a Server needs beyond its Spec.
type Options struct {
	// Log gets the server's starts, losses and skipped tools.
	Log *slog.Logger
	// Stderr gets a stdio server's standard error; nil discards it.
	Stderr io.Writer
	// Version is the client's version in the MCP handshake.
	Version string
	// ConnectTimeout bounds a start and handshake; default 30 s.
	ConnectTimeout time.Duration
	// transport, if set, stands in for the Spec's (tests).
	transport func() mcp.Transport
}

// restartBackoff bounds the waits between attempts to connect again.
const (
	restartMin = 100 * time.Millisecond
	restartMax = 10 * time.Second
	// callWaitMax is how long a call waits for a lost server to be back
	// before it fails with MCP_UNAVAILABLE.
	callWaitMax = 10 * time.Second
)

// Server is a connected MCP server and the skills of its tools. Its
// methods may be called from many goroutines.
type Server struct {
	spec   Spec
	opts   Options
	client *mcp.Client

	mu    sync.Mutex
	cs    *mcp.ClientSession // nil while lost
	ready chan struct{}      // closed when cs is set again

	closing chan struct{}
	done    chan struct{}
	skills  []skill.Skill
}

// Open starts (or connects to) the server, lists its tools and keeps the
// session until Close, connecting again whenever it is lost. Tools whose
// names cannot be skill names, or whose schemas do not compile, are left
// out with a warning; a server with no tool left is an error.
func Open(ctx context.Context, spec Spec, opts Options) (*Server, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 30 * time.Second
	}
	opts.Log = opts.Log.With(slog.String("mcp", spec.Name))
	s := &Server{spec: spec, opts: opts, closing: make(chan struct{}), done: make(chan struct{}), ready: make(chan struct{})}
	s.client = mcp.NewClient(&mcp.Implementation{Name: "planbus-toolworker", Version: opts.Version},
		&mcp.ClientOptions{Logger: opts.Log})
	cs, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	var tools []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			_ = cs.Close()
			return nil, fmt.Errorf("mcp server %s (%s): listing its tools: %w", spec.Name, spec.Where(), err)
		}
		tools = append(tools, t)
	}
	for _, t := range tools {
		sk, err := s.skillOf(t)
		if err != nil {
			opts.Log.Warn("a tool of the MCP server is not served", slog.String("tool", t.Name), slog.Any("err", err))
			continue
		}
		s.skills = append(s.skills, sk)
	}
	if len(s.skills) == 0 {
		_ = cs.Close()
		return nil, fmt.Errorf("mcp server %s (%s): no tool to serve (it lists %d)", spec.Name, spec.Where(), len(tools))
	}
	if info := cs.InitializeResult(); info != nil && info.ServerInfo != nil {
		for i := range s.skills {
			s.skills[i].Manifest.Version = info.ServerInfo.Version
		}
	}
	s.cs = cs
	close(s.ready)
	go s.supervise(cs)
	return s, nil
}

// Skills are the server's tools as skills, NAME.TOOL.
func (s *Server) Skills() []skill.Skill { return s.skills }

// Close ends the session (a stdio server's stdin is closed, and the
// process signalled if it does not exit) and stops connecting again.
func (s *Server) Close() error {
	select {
	case <-s.closing:
	default:
		close(s.closing)
	}
	s.mu.Lock()
	cs := s.cs
	s.mu.Unlock()
	var err error
	if cs != nil {
		err = cs.Close()
	}
	<-s.done
	return err
}

// connect starts the process (or opens the HTTP session) and shakes
// hands, within the connect timeout.
func (s *Server) connect(ctx context.Context) (*mcp.ClientSession, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout)
	defer cancel()
	cs, err := s.client.Connect(ctx, s.transport(), nil)
	if err != nil {
		return nil, fmt.Errorf("mcp server %s (%s): %w", s.spec.Name, s.spec.Where(), err)
	}
	attrs := []any{slog.String("at", s.spec.Where())}
	if info := cs.InitializeResult(); info != nil && info.ServerInfo != nil {
		attrs = append(attrs, slog.String("server", info.ServerInfo.Name), slog.String("version", info.ServerInfo.Version))
	}
	s.opts.Log.Info("mcp server connected", attrs...)
	return cs, nil
}

// transport is a new transport of the spec: a fresh process each time.
func (s *Server) transport() mcp.Transport {
	if s.opts.transport != nil {
		return s.opts.transport()
	}
	if s.spec.URL != "" {
		hc := &http.Client{}
		if s.spec.Token != "" {
			hc.Transport = bearer{token: s.spec.Token, next: http.DefaultTransport}
		}
		return &mcp.StreamableClientTransport{Endpoint: s.spec.URL, HTTPClient: hc}
	}
	cmd := exec.Command(s.spec.Command[0], s.spec.Command[1:]...)
	cmd.Stderr = s.opts.Stderr
	cmd.SysProcAttr = childAttr()
	// A server that leaves a child holding its stderr must not hold the
	// worker in Wait.
	cmd.WaitDelay = 5 * time.Second
	return &processTransport{CommandTransport: mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, log: s.opts.Log}
}

// processTransport logs the process it started.
type processTransport struct {
	mcp.CommandTransport
	log *slog.Logger
}

func (t *processTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.CommandTransport.Connect(ctx)
	if err == nil {
		t.log.Info("mcp server process started", slog.Int("pid", t.Command.Process.Pid))
	}
	return c, err
}

// bearer sends a bearer token with every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// supervise waits for the session to end and, unless the server is
// closing, connects again with a backoff until it is back.
func (s *Server) supervise(cs *mcp.ClientSession) {
	defer close(s.done)
	for {
		err := cs.Wait()
		select {
		case <-s.closing:
			return
		default:
		}
		s.mu.Lock()
		s.cs, s.ready = nil, make(chan struct{})
		s.mu.Unlock()
		_ = cs.Close() // reaps a process that died
		s.opts.Log.Warn("mcp server lost; connecting again", slog.Any("err", err))
		wait := restartMin
		for {
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				select {
				case <-s.closing:
					cancel()
				case <-ctx.Done():
				}
			}()
			next, err := s.connect(ctx)
			cancel()
			if err == nil {
				s.mu.Lock()
				s.cs = next
				close(s.ready)
				s.mu.Unlock()
				cs = next
				break
			}
			s.opts.Log.Warn("mcp server did not come back", slog.Any("err", err), slog.Duration("next_try", wait))
			select {
			case <-s.closing:
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, restartMax)
		}
		select {
		case <-s.closing:
			_ = cs.Close()
			return
		default:
		}
	}
}

// session is the current session, waiting up to callWaitMax (or ctx) for
// a lost one to come back.
func (s *Server) session(ctx context.Context) (*mcp.ClientSession, error) {
	s.mu.Lock()
	cs, ready := s.cs, s.ready
	s.mu.Unlock()
	if cs != nil {
		return cs, nil
	}
	t := time.NewTimer(callWaitMax)
	defer t.Stop()
	select {
	case <-ready:
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.cs != nil {
			return s.cs, nil
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
	case <-s.closing:
	}
	return nil, skill.Network(planbus.CodeMCPUnavailable, "mcp server %s (%s) is not connected; the worker is starting it again", s.spec.Name, s.spec.Where())
}

// skillOf is a tool as a skill.
func (s *Server) skillOf(t *mcp.Tool) (skill.Skill, error) {
	if !wire.IsName(t.Name) {
		return skill.Skill{}, fmt.Errorf("its name %q is not 1 to 64 letters, digits, '_' or '-'", t.Name)
	}
	m := skill.Manifest{Name: s.spec.Name + "." + t.Name, Description: t.Description}
	if m.Description == "" {
		m.Description = t.Title
	}
	var err error
	if m.InputSchema, err = schemaJSON(t.InputSchema); err != nil {
		return skill.Skill{}, fmt.Errorf("its input schema: %w", err)
	}
	if m.OutputSchema, err = schemaJSON(t.OutputSchema); err != nil {
		return skill.Skill{}, fmt.Errorf("its output schema: %w", err)
	}
	if a := t.Annotations; a != nil {
		m.ReadOnly, m.Idempotent = a.ReadOnlyHint, a.IdempotentHint
	}
	if !m.ReadOnly && !m.Idempotent {
		// Calling it again may do it twice: one attempt unless a plan
		// asks for more.
		m.RetryPolicy = &planbus.RetryPolicy{MaxAttempts: 1}
	}
	// The worker compiles the schemas; a tool whose schemas it cannot
	// use is left out here rather than failing the worker.
	if _, err := skill.InputSchema(m); err != nil {
		return skill.Skill{}, err
	}
	if _, err := skill.OutputSchema(m); err != nil {
		return skill.Skill{}, err
	}
	name := t.Name
	return skill.Skill{Manifest: m, Handler: skill.HandlerFunc(func(ctx context.Context, call *skill.Call) (skill.Result, error) {
		return s.call(ctx, name, call)
	})}, nil
}

// schemaJSON is a tool's schema as JSON; none is nil.
func schemaJSON(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		return nil, err
	}
	return b, nil
}

// call runs one call of tool.
func (s *Server) call(ctx context.Context, tool string, call *skill.Call) (skill.Result, error) {
	cs, err := s.session(ctx)
	if err != nil {
		return skill.Result{}, err
	}
	args := call.Input
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		if ctx.Err() != nil {
			return skill.Result{}, ctx.Err()
		}
		var we *jsonrpc.Error
		if errors.As(err, &we) {
			switch we.Code {
			case jsonrpc.CodeInvalidParams:
				return skill.Result{}, skill.InvalidInput("mcp %s.%s: %s", s.spec.Name, tool, we.Message)
			case jsonrpc.CodeMethodNotFound:
				return skill.Result{}, skill.Permanent(planbus.CodeMCPToolError, "mcp %s.%s: %s", s.spec.Name, tool, we.Message)
			}
			return skill.Result{}, skill.Transient(planbus.CodeMCPToolError, "mcp %s.%s: %s (JSON-RPC error %d)", s.spec.Name, tool, we.Message, we.Code)
		}
		return skill.Result{}, skill.Network(planbus.CodeMCPUnavailable, "mcp server %s (%s): %v", s.spec.Name, s.spec.Where(), err)
	}
	if res.IsError {
		msg := contentText(res.Content)
		if msg == "" {
			msg = "the tool reported an error and no text"
		}
		return skill.Result{}, skill.Permanent(planbus.CodeMCPToolError, "%s", msg)
	}
	out, err := output(res)
	if err != nil {
		return skill.Result{}, skill.Permanent(planbus.CodeOutputNotJSON, "mcp %s.%s: %v", s.spec.Name, tool, err)
	}
	return skill.Result{Output: out}, nil
}

// output is a result's output: its structured content if it has one,
// else {"text": the text of its content} with the other content blocks
// (images, resources) under "content".
func output(res *mcp.CallToolResult) (json.RawMessage, error) {
	if res.StructuredContent != nil {
		return json.Marshal(res.StructuredContent)
	}
	o := struct {
		Text    string        `json:"text"`
		Content []mcp.Content `json:"content,omitempty"`
	}{Text: contentText(res.Content)}
	for _, c := range res.Content {
		if _, ok := c.(*mcp.TextContent); !ok {
			o.Content = append(o.Content, c)
		}
	}
	return json.Marshal(o)
}

// contentText is the text blocks of content, joined by newlines.
func contentText(content []mcp.Content) string {
	var parts []string
	for _, c := range content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}
