package web_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/internal/web"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

// patience bounds every wait; a plan of these tests ends in a second.
const patience = time.Minute

// logBuffer collects a node's log, safe for concurrent writes.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// system is a planbus node with authorization on, the view on a client
// role's connection behind an httptest server, and a client of its own.
type system struct {
	node *node.Node
	view *web.Server
	srv  *httptest.Server
	cl   *client.Client
	conn *bus.Conn // the client's
	logs *logBuffer
	http *http.Client
}

// start runs the system; cfg configures the view.
func start(t *testing.T, cfg web.Config) *system {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	logs := &logBuffer{}
	log := zerolog.New(logs).Level(zerolog.WarnLevel)
	n, err := node.Start(ctx, node.Config{
		Bus:     bus.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), DuplicateWindow: time.Minute},
		Auth:    true,
		Workers: 2,
		Worker:  worker.Config{Skills: append(skills.Builtins(skills.BuiltinConfig{}), wordsSkill())},
	}, log)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(n.Stop)
	viewConn, err := n.DialAs(ctx, bus.RoleClient, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(viewConn.Close)
	if cfg.Version == "" {
		cfg.Version = "test"
	}
	view, err := web.New(viewConn.NC, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(view)
	// Streams left open by a failed test end before the server closes.
	t.Cleanup(srv.Close)
	t.Cleanup(view.Close)
	conn, err := n.DialAs(ctx, bus.RoleClient, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	cl, err := client.New(conn.NC)
	if err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: patience, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	s := &system{node: n, view: view, srv: srv, cl: cl, conn: conn, logs: logs, http: hc}
	t.Cleanup(func() {
		// Every page works within the client role: the server reports
		// nothing it refused.
		if strings.Contains(logs.String(), "Violation") || strings.Contains(logs.String(), "permissions violation") {
			t.Errorf("the view needed more than the client role allows:\n%s", logs.String())
		}
	})
	return s
}

// page is an answer of the view.
type page struct {
	code int
	body string
	hdr  http.Header
}

// get fetches path and returns the answer.
func (s *system) get(t *testing.T, path string) page {
	t.Helper()
	return s.do(t, http.MethodGet, path, nil, nil)
}

// post sends a form to path.
func (s *system) post(t *testing.T, path string, form url.Values) page {
	t.Helper()
	return s.do(t, http.MethodPost, path, strings.NewReader(form.Encode()),
		http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
}

func (s *system) do(t *testing.T, method, path string, body io.Reader, hdr http.Header) page {
	t.Helper()
	req, err := http.NewRequest(method, s.srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := s.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return page{code: resp.StatusCode, body: string(b), hdr: resp.Header}
}

// must fails the test unless the page answered code and holds every
// piece of want.
func (p page) must(t *testing.T, what string, code int, want ...string) {
	t.Helper()
	if p.code != code {
		t.Fatalf("%s: status %d, want %d\n%s", what, p.code, code, p.body)
	}
	for _, w := range want {
		if !strings.Contains(p.body, w) {
			t.Errorf("%s: no %q in\n%s", what, w, p.body)
		}
	}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the CSRF token of a page's form.
func (p page) csrf(t *testing.T) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", p.body)
	}
	return m[1]
}

// readPlan reads an example plan of the repository.
func readPlan(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../../examples/plans/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withID sets a plan's planId.
func withID(t *testing.T, doc []byte, id string) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	m["planId"] = id
	b, _ := json.Marshal(m)
	return b
}

// run runs a plan through the planner to its end.
func (s *system) run(t *testing.T, doc []byte) *planbus.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	o, err := s.cl.RunPlan(ctx, doc, nil)
	if err != nil {
		t.Fatalf("run: %v\nlog:\n%s", err, s.logs.String())
	}
	return o
}

// sseEvent is one event of a stream.
type sseEvent struct {
	name string
	data string
}

// openStream opens an event stream of the view; its events arrive on the
// channel, which is closed when the stream ends.
func (s *system) openStream(t *testing.T, ctx context.Context, path string) (<-chan sseEvent, *http.Response) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	hc := &http.Client{Jar: s.http.Jar}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan sseEvent, 1024)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			case line == "" && ev.name != "":
				ch <- ev
				ev = sseEvent{}
			}
		}
	}()
	return ch, resp
}

// waitStarted waits for a tool of a request to start on a worker.
func (s *system) waitStarted(t *testing.T, ctx context.Context, requestID, toolID string) {
	t.Helper()
	started := make(chan struct{})
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		var once sync.Once
		_, _ = s.cl.Watch(wctx, requestID, func(ev planbus.Event) {
			if ev.Type == planbus.EventToolStarted && ev.ToolID == toolID {
				once.Do(func() { close(started) })
			}
		})
	}()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatalf("tool %s of %s never started", toolID, requestID)
	}
}

// wordsSkill is a typed skill, whose manifest has an output schema too.
func wordsSkill() skill.Skill {
	type in struct {
		Text string `json:"text"`
	}
	type out struct {
		Words int `json:"words"`
	}
	return skill.Func("words", "Counts the words of a text.", func(_ context.Context, v in) (out, error) {
		return out{Words: len(strings.Fields(v.Text))}, nil
	})
}
