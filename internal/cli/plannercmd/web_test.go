package plannercmd

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/worker"
)

var viewLine = regexp.MustCompile(`web view on (http://[^\s"]+)`)

// watchedBuffer is a bustest.SyncBuffer that signals every write, so a test can
// wait for a line without polling.
type watchedBuffer struct {
	bustest.SyncBuffer
	wrote chan struct{}
}

func (b *watchedBuffer) Write(p []byte) (int, error) {
	n, err := b.SyncBuffer.Write(p)
	select {
	case b.wrote <- struct{}{}:
	default:
	}
	return n, err
}

// waitFor waits until the buffer matches re and returns the match; it
// fails the test if the command exits first or nothing matches in time.
func (b *watchedBuffer) waitFor(t *testing.T, re *regexp.Regexp, code <-chan int) []string {
	t.Helper()
	deadline := time.After(wait)
	for {
		if m := re.FindStringSubmatch(b.String()); m != nil {
			return m
		}
		select {
		case <-b.wrote:
		case c := <-code:
			t.Fatalf("exited %d before writing %s:\n%s", c, re, b.String())
		case <-deadline:
			t.Fatalf("no %s within %s:\n%s", re, wait, b.String())
		}
	}
}

// background runs a long-lived command (serve, ui) until the test ends;
// it returns its stderr and a channel with its exit code.
func background(t *testing.T, args ...string) (*watchedBuffer, <-chan int) {
	t.Helper()
	return component(t, Run, nil, args...)
}

// viewURL waits for a command to say where its view is.
func viewURL(t *testing.T, stderr *watchedBuffer, code <-chan int) string {
	t.Helper()
	return stderr.waitFor(t, viewLine, code)[1]
}

func browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: wait, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func fetch(t *testing.T, hc *http.Client, url string, hdr ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// planner serve --auth serves the view as a client of its node, asking
// for the token it keeps in the data directory.
func TestServeServesTheView(t *testing.T) {
	dir := t.TempDir()
	stderr, code := background(t, "serve", "--listen", "127.0.0.1:0", "--data-dir", dir, "--workers", "1", "--auth", "--http", "127.0.0.1:0")
	url := viewURL(t, stderr, code)
	file := filepath.Join(dir, "auth", "web.token")
	if !strings.Contains(stderr.String(), file) {
		t.Errorf("serve does not say where the token is:\n%s", stderr.String())
	}
	st, err := os.Stat(file)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, mode %v; want 0600", err, st)
	}
	tok, _ := os.ReadFile(file)
	if strings.Contains(stderr.String(), strings.TrimSpace(string(tok))) {
		t.Errorf("serve printed the token kept in its file")
	}
	hc := browser()
	if c, _ := fetch(t, hc, url+"requests"); c != http.StatusSeeOther {
		t.Errorf("without the token: %d, want a redirect to the login", c)
	}
	c, body := fetch(t, hc, url+"system", "Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	if c != http.StatusOK || !strings.Contains(body, bus.ServiceDispatcher) {
		t.Errorf("with the token: %d\n%s", c, body)
	}
}

// The view's flags: protected mode, bad addresses, an address that is
// taken, and off.
func TestServeViewFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--http", "0.0.0.0:0"}, "not a loopback address"},
		{[]string{"--http", "nowhere"}, "want host:port"},
	} {
		o := runPlanner(t, append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir()}, tc.args...)...)
		if o.code != cli.ExitUsage || !strings.Contains(o.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, o.code, o.stderr, cli.ExitUsage, tc.want)
		}
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	o := runPlanner(t, "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--workers", "0", "--http", taken.Addr().String())
	if o.code != cli.ExitUsage || !strings.Contains(o.stderr, "address already in use") {
		t.Errorf("an address taken: exit %d, stderr %q; want %d naming it", o.code, o.stderr, cli.ExitUsage)
	}

	// The default address taken (by this test, or by whatever holds it):
	// serve goes on without the view.
	if l, err := net.Listen("tcp", DefaultHTTP); err == nil {
		defer l.Close()
	}
	stderr, code := background(t, "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--workers", "0")
	stderr.waitFor(t, regexp.MustCompile("no web view"), code)
	if !strings.Contains(stderr.String(), "node up") {
		t.Errorf("serve did not go on without its view:\n%s", stderr.String())
	}

	// --http "": no view.
	stderr, code = background(t, "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--workers", "0", "--http", "")
	stderr.waitFor(t, regexp.MustCompile("node up"), code)
	if strings.Contains(stderr.String(), "web view") {
		t.Errorf(`--http "": a view anyway:\n%s`, stderr.String())
	}
}

// planner run --http serves the view while the plan runs; with --auth,
// behind a token made for the run and printed in the link.
func TestRunServesTheView(t *testing.T) {
	plan := filepath.Join(t.TempDir(), "slow.json")
	if err := os.WriteFile(plan, []byte(`{"planId": "slow", "tools": [{"toolId": "S", "skill": "sleep", "input": {"ms": 3000}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr, code := background(t, "run", "--auth", "--http", "127.0.0.1:0", plan)
	link := viewURL(t, stderr, code)
	if !strings.Contains(link, "?token=") {
		t.Fatalf("run --auth: the link %q has no token", link)
	}
	hc := browser()
	c, _ := fetch(t, hc, strings.Replace(link, "?token=", "?token=x", 1))
	if c != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d, want 401", c)
	}
	if c, _ := fetch(t, hc, link); c != http.StatusSeeOther {
		t.Errorf("the link: %d, want a redirect after the login", c)
	}
	base := strings.SplitN(link, "/?", 2)[0]
	// The run submits its plan after it serves the view: wait for the
	// request's first change the view sees.
	req, _ := http.NewRequest(http.MethodGet, base+"/events?request=slow", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := (&http.Client{Jar: hc.Jar}).Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the request's events: %v %v", err, resp)
	}
	line := make([]byte, 64)
	for !strings.Contains(string(line), "changed") {
		n, err := resp.Body.Read(line)
		if err != nil {
			t.Fatalf("the request's events: %v", err)
		}
		line = line[:n]
	}
	resp.Body.Close()
	c, body := fetch(t, hc, base+"/requests/slow")
	if c != http.StatusOK || !strings.Contains(body, `data-request="slow"`) {
		t.Errorf("the run's request during the run: %d\n%s", c, body)
	}
	select {
	case got := <-code:
		if got != cli.ExitOK {
			t.Errorf("run: exit %d\n%s", got, stderr.String())
		}
	case <-time.After(wait):
		t.Fatal("the run did not end")
	}
	if _, err := http.Get(base + "/requests"); err == nil {
		t.Errorf("the view is still served after the run")
	}
}

// planner ui serves the view of a running system as its client role.
func TestUIServesARunningSystem(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	n, err := node.Start(ctx, node.Config{Bus: bus.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), DuplicateWindow: time.Minute},
		Auth: true, Workers: 1, Worker: worker.Config{Skills: skills.Builtins(skills.BuiltinConfig{})}}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)

	if o := runPlanner(t, "ui"); o.code != cli.ExitUsage || !strings.Contains(o.stderr, "--nats-url") {
		t.Errorf("ui without --nats-url: exit %d %q", o.code, o.stderr)
	}
	if o := runPlanner(t, "ui", "--nats-url", n.Bus.URL, "--http", "192.0.2.1:80"); o.code != cli.ExitUsage || !strings.Contains(o.stderr, "--auth") {
		t.Errorf("ui beyond loopback without --auth: exit %d %q", o.code, o.stderr)
	}
	stderr, code := background(t, "ui", "--nats-url", n.Bus.URL, "--nkey", n.Seeds.File(bus.RoleClient), "--http", "127.0.0.1:0", "--auth")
	link := viewURL(t, stderr, code)
	hc := browser()
	if c, _ := fetch(t, hc, link); c != http.StatusSeeOther {
		t.Fatalf("the link: %d, want the login's redirect", c)
	}
	base := strings.SplitN(link, "/?", 2)[0]
	c, body := fetch(t, hc, base+"/system")
	if c != http.StatusOK || !strings.Contains(body, bus.ServiceToolworker) || strings.Contains(body, "None answers") {
		t.Errorf("system page: %d\n%s", c, body)
	}
}

// The view's token file: made once with a random token (0600), read
// back after; one that does not hold a token is refused, naming it.
func TestViewToken(t *testing.T) {
	file := filepath.Join(t.TempDir(), "auth", "web.token")
	first, err := viewToken(file)
	if err != nil || len(first) < 32 {
		t.Fatalf("made: %q %v", first, err)
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the file: %v %v, want mode 0600", st, err)
	}
	if again, err := viewToken(file); err != nil || again != first {
		t.Errorf("read back: %q %v, want %q", again, err, first)
	}
	if other, _ := viewToken(""); other == first || len(other) < 32 {
		t.Errorf("a token for one run: %q", other)
	}
	for _, bad := range []string{"short", "two tokens-------- here-----------", ""} {
		if err := os.WriteFile(file, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := viewToken(file); err == nil || !strings.Contains(err.Error(), file) {
			t.Errorf("%q: %v, want an error naming the file", bad, err)
		}
	}
}
