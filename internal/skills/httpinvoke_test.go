package skills_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

// invoker runs a worker serving the http skill with cfg on a real
// embedded JetStream server, and returns a function that calls
// planbus.invoke.http as a client would.
func invoker(t *testing.T, cfg skills.HTTPConfig) func(input string) planbus.ToolResult {
	t.Helper()
	bc := bustest.Start(t)
	w, err := worker.New(bustest.Dial(t, bc).NC, worker.Config{Skills: []skill.Skill{skills.HTTP(cfg)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(guard):
			t.Errorf("the worker did not stop within %v", guard)
		}
	})
	select {
	case <-w.Ready():
	case err := <-done:
		t.Fatalf("the worker stopped before it was ready: %v", err)
	case <-time.After(guard):
		t.Fatalf("the worker was not ready within %v", guard)
	}
	client := bustest.Dial(t, bc)
	return func(input string) planbus.ToolResult {
		t.Helper()
		m, err := client.NC.Request("planbus.invoke.http", []byte(input), guard)
		if err != nil {
			t.Fatalf("request planbus.invoke.http: %v", err)
		}
		var res planbus.ToolResult
		if err := json.Unmarshal(m.Data, &res); err != nil {
			t.Fatalf("reply is not a result: %v: %.200s", err, m.Data)
		}
		return res
	}
}

// TestInvokeHTTPRefusesLoopbackByDefault is the must-show: a client that
// asks a default worker, over planbus.invoke.http, for a server on
// 127.0.0.1 gets a refusal, and the server sees nothing.
func TestInvokeHTTPRefusesLoopbackByDefault(t *testing.T) {
	var hits atomic.Int32
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.WriteString(w, "secret")
	})
	invoke := invoker(t, skills.HTTPConfig{})
	for _, url := range []string{srv.URL + "/", strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) + "/"} {
		res := invoke(`{"url": "` + url + `"}`)
		if res.State != planbus.ToolFailed || res.Error == nil || res.Error.Code != planbus.CodeHTTPAddressRefused {
			t.Fatalf("%s: result %s %+v, want failed with %s", url, res.State, res.Error, planbus.CodeHTTPAddressRefused)
		}
		if !strings.Contains(res.Error.Message, "127.0.0.1 (loopback)") || !strings.Contains(res.Error.Message, "--http-allow-private") {
			t.Errorf("%s: message %q does not name the address and the flag", url, res.Error.Message)
		}
		if strings.Contains(string(res.Output), "secret") {
			t.Errorf("%s: the output carries the server's answer: %s", url, res.Output)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server got %d requests, want 0", n)
	}
}

// TestInvokeHTTPLargeBodyIsTruncated checks that bodies of 1 MiB and more
// come back from a worker with its default output cap as truncated
// outputs, not as OUTPUT_TOO_LARGE.
func TestInvokeHTTPLargeBodyIsTruncated(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		n := 1 << 20
		if r.URL.Path == "/4mib" {
			n = 4 << 20
		}
		_, _ = io.WriteString(w, strings.Repeat("\"", n)) // each byte costs two in JSON
	})
	invoke := invoker(t, skills.HTTPConfig{AllowPrivate: true})
	for _, path := range []string{"/1mib", "/4mib"} {
		res := invoke(`{"url": "` + srv.URL + path + `"}`)
		if res.State != planbus.ToolSucceeded {
			t.Fatalf("%s: result %s %+v, want succeeded", path, res.State, res.Error)
		}
		out := decodeHTTP(t, res.Output)
		var body string
		if err := json.Unmarshal(out.Body, &body); err != nil || !out.Truncated || len(body) < 1<<18 {
			t.Errorf("%s: got %d bytes of body, truncated %v (%v); want a truncated body of at least 256 KiB", path, len(body), out.Truncated, err)
		}
	}
}
