package plannercmd

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/mcpserver"
)

const mcpUsage = `Usage: planner mcp --nats-url URL [--nkey client.nk] [--listen ADDR [--token-file F]]

Serves planbus as a Model Context Protocol server, for MCP agents and
clients (desktop and IDE assistants, agent frameworks): the tools
submit_request, run_plan, status, cancel, approve, list_skills, guide_turn,
agent_start and agent_status, each with input and output schemas, called
through a client connection to the running system (the client role). A
planbus refusal is a tool error led by its code (INVALID_REQUEST: ...).

Without --listen it speaks MCP on stdin and stdout, as an MCP client starts
it ("command": "planner", "args": ["mcp", "--nats-url", ...]); logs go to
stderr. With --listen it serves streamable HTTP at http://ADDR/mcp instead.
Every HTTP request must then carry "Authorization: Bearer TOKEN", the token
read from --token-file or $PLANBUS_MCP_TOKEN; only an address on the
loopback interface may be served without one. Exits 0 when stdin ends or
on SIGINT/SIGTERM, 2 on bad usage, 1 when the system cannot be reached.`

// mcpTokenEnv holds the bearer token of planner mcp --listen.
const mcpTokenEnv = "PLANBUS_MCP_TOKEN"

func plannerMCP(ctx context.Context, args []string, std cli.IO) int {
	var c common
	var listen, tokenFile string
	f := cli.NewFlags("planner mcp", std.Stderr, std.Env, mcpUsage)
	c.Register(f, cli.AsClient)
	c.RegisterClient(f)
	f.String(&listen, "listen", "", "", "serve streamable HTTP on this address (host:port) instead of stdio")
	f.String(&tokenFile, "token-file", "", "", "with --listen: the file holding the bearer token HTTP requests must carry (else $"+mcpTokenEnv+")")
	log, code, ok := clientFlags(f, &c, args, std, "planner mcp")
	if !ok {
		return code
	}
	if f.NArg() != 0 {
		fmt.Fprintf(std.Stderr, "planner mcp: takes no arguments%s\n", f.LateFlags())
		return cli.ExitUsage
	}
	token, err := mcpToken(tokenFile, std.Env)
	if err != nil {
		fmt.Fprintf(std.Stderr, "planner mcp: %v\n", err)
		return cli.ExitUsage
	}
	if listen == "" && token != "" && tokenFile != "" {
		fmt.Fprintln(std.Stderr, "planner mcp: --token-file is for --listen; stdio needs no token")
		return cli.ExitUsage
	}
	if listen != "" && token == "" && !loopback(listen) {
		fmt.Fprintf(std.Stderr, "planner mcp: --listen %s is reachable beyond this machine: give a bearer token (--token-file or $%s), or listen on 127.0.0.1\n", listen, mcpTokenEnv)
		return cli.ExitUsage
	}
	cl, closeConn, err := c.dialClient(ctx, log)
	if err != nil {
		fmt.Fprintf(std.Stderr, "planner mcp: %v\n", err)
		return cli.CtxExit(ctx, cli.ExitFailed)
	}
	defer closeConn()
	server := mcpserver.New(cl, cli.Version())
	if listen == "" {
		t := &mcp.IOTransport{Reader: io.NopCloser(std.Stdin), Writer: nopWriteCloser{std.Stdout}}
		if err := server.Run(ctx, t); err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
			fmt.Fprintf(std.Stderr, "planner mcp: %v\n", err)
			return cli.ExitFailed
		}
		return cli.ExitOK
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		fmt.Fprintf(std.Stderr, "planner mcp: %v\n", err)
		return cli.ExitFailed
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp", bearer(token, handler))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Info().Str("url", "http://"+ln.Addr().String()+"/mcp").Bool("token", token != "").Msg("serving MCP")
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		fmt.Fprintf(std.Stderr, "planner mcp: %v\n", err)
		return cli.ExitFailed
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
	return cli.ExitOK
}

// mcpToken reads the bearer token: the file's first line, else the
// environment's; empty when neither is given.
func mcpToken(file string, env func(string) string) (string, error) {
	if file == "" {
		return strings.TrimSpace(env(mcpTokenEnv)), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	token, _, _ := strings.Cut(string(b), "\n")
	if token = strings.TrimSpace(token); token == "" {
		return "", fmt.Errorf("--token-file %s: empty", file)
	}
	return token, nil
}

// loopback reports whether addr (host:port) listens on the loopback
// interface only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// bearer lets through the requests that carry token ("Authorization:
// Bearer TOKEN"); any request when token is empty.
func bearer(token string, h http.Handler) http.Handler {
	if token == "" {
		return h
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="planbus"`)
			http.Error(w, "planner mcp: a bearer token is required (Authorization: Bearer TOKEN)", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
