// Command mcp-server is a small Model Context Protocol server written with
// the official Go SDK, speaking MCP on stdin and stdout: the kind of
// server an agent (or a planbus worker serving MCP tools) starts as a
// process. Its tools:
//
//   - add: the sum of two numbers (read-only, idempotent)
//   - shout: a text in capitals
//   - refuse: always a tool error (isError) with the reason given
//   - wait: waits the milliseconds given, or until the call is cancelled
//     (read-only, idempotent); it says on stderr that it waits, with its
//     process id
//
// Run it under an MCP client, for example:
//
//	go run ./examples/mcp-server
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// AddInput is add's input.
type AddInput struct {
	A float64 `json:"a" jsonschema:"the first number"`
	B float64 `json:"b" jsonschema:"the second number"`
}

// AddOutput is add's output.
type AddOutput struct {
	Sum float64 `json:"sum"`
}

// TextInput is shout's input.
type TextInput struct {
	Text string `json:"text" jsonschema:"the text"`
}

// TextOutput is shout's output.
type TextOutput struct {
	Text string `json:"text"`
}

// RefuseInput is refuse's input.
type RefuseInput struct {
	Reason string `json:"reason" jsonschema:"what the error says"`
}

// WaitInput is wait's input.
type WaitInput struct {
	Ms int `json:"ms" jsonschema:"milliseconds to wait"`
}

// WaitOutput is wait's output.
type WaitOutput struct {
	WaitedMs int `json:"waitedMs"`
}

// NewServer is the server with its four tools.
func NewServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "planbus-example", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Adds two numbers.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in AddInput) (*mcp.CallToolResult, AddOutput, error) {
			return nil, AddOutput{Sum: in.A + in.B}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "shout", Description: "Returns the text in capitals.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in TextInput) (*mcp.CallToolResult, TextOutput, error) {
			return nil, TextOutput{Text: strings.ToUpper(in.Text)}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "refuse", Description: "Always fails, with the reason given."},
		func(_ context.Context, _ *mcp.CallToolRequest, in RefuseInput) (*mcp.CallToolResult, any, error) {
			return nil, nil, fmt.Errorf("refused: %s", in.Reason)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "wait", Description: "Waits the milliseconds given.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest, in WaitInput) (*mcp.CallToolResult, WaitOutput, error) {
			// stdout is the protocol's; what a person (or a test) should
			// see goes to stderr, which a planbus worker shows in its log.
			log.Printf("pid %d: waiting %d ms", os.Getpid(), in.Ms)
			start := time.Now()
			select {
			case <-time.After(time.Duration(in.Ms) * time.Millisecond):
			case <-ctx.Done():
				return nil, WaitOutput{}, ctx.Err()
			}
			return nil, WaitOutput{WaitedMs: int(time.Since(start).Milliseconds())}, nil
		})
	return s
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := NewServer().Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
}
