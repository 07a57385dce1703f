package web_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/planbus/planbus/internal/web"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write the browser test's screenshot to docs/web.png")

// chromium finds Debian's chromium, or skips the test saying why; with
// PLANBUS_REQUIRE_CHROMIUM=1 (as in .ci/run) a missing browser fails it.
func chromium(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("PLANBUS_REQUIRE_CHROMIUM") == "1" {
			t.Fatalf("chromium is required (PLANBUS_REQUIRE_CHROMIUM=1) and not found: %v; apt-get install -y chromium", err)
		}
		t.Skipf("no chromium to drive (%v): apt-get install -y chromium, or set PLANBUS_REQUIRE_CHROMIUM=1 to make this a failure", err)
	}
	return path
}

// allTools is true once every node of the drawn DAG has state.
const allTools = `(() => {
	const nodes = Array.from(document.querySelectorAll('#dag g.node'));
	return nodes.length === %d && nodes.every(n => n.classList.contains('st-%s'));
})()`

// A person's path through the view in a real browser: log in with the
// token's link, submit a diamond in the form, follow its request to its
// plan, watch every node turn succeeded as it runs (server-sent events),
// open a tool's panel; then a plan whose required tool fails, and its
// error in the tool's panel.
func TestBrowser(t *testing.T) {
	path := chromium(t)
	s := start(t, web.Config{Token: token})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1360, 860), chromedp.Flag("disable-gpu", true))...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancelBrowser()

	// The sleeps are long enough for the plan page to open while they run.
	diamond := `{"planId": "web-diamond", "description": "A feeds B and C, which run in parallel; D joins them.", "tools": [
  {"toolId": "A", "skill": "echo", "input": {"city": "Lisbon"}},
  {"toolId": "B", "skill": "sleep", "dependencies": ["A"], "input": {"ms": 5000}},
  {"toolId": "C", "skill": "sleep", "dependencies": ["A"], "input": {"ms": 3000}},
  {"toolId": "D", "skill": "echo", "dependencies": ["B", "C"], "input": {"city": {"$ref": "A#/city"}, "slept": [{"$ref": "B#/sleptMs"}, {"$ref": "C#/sleptMs"}]}}]}`
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	err := chromedp.Do(bctx,
		chromedp.Navigate(s.srv.URL+"/submit?token="+token),
		chromedp.WaitVisible(css(`#document`)),
	)
	if err != nil {
		t.Fatalf("the login link in the browser: %v", err)
	}
	if url, err := chromedp.Run(bctx, chromedp.Location()); err != nil || strings.Contains(url, "token=") {
		t.Errorf("after the login the address is %q (%v), want it without the token", url, err)
	}
	err = chromedp.Do(step(t, bctx),
		chromedp.SetValue(css(`#document`), diamond),
		chromedp.Click(css(`#send`)),
	)
	if err != nil {
		t.Fatalf("submitting the diamond: %v\n%s", err, where(bctx))
	}
	openPlan(t, bctx)
	loaded, err := chromedp.Run(bctx, chromedp.AttributeValue(css(`#facts`), "data-state"))
	if err != nil || loaded.Value != "running" {
		t.Errorf("the plan page opened on a plan in state %q (%v); want running, so that its nodes turn succeeded live", loaded.Value, err)
	}
	// Every node turns succeeded; when the plan ends the page reads
	// itself again (for the outputs), and shows the plan ended.
	err = settle(step(t, bctx),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Poll[bool](fmt.Sprintf(allTools, 4, "succeeded"), chromedp.WithPollingTimeout(time.Minute))(ctx, tg)
			return err
		}),
		chromedp.WaitVisible(css(`#facts[data-state="succeeded"]`)),
		chromedp.WaitVisible(css(`#plan-state.st-succeeded`)),
	)
	if err != nil {
		t.Fatalf("waiting for every node to succeed: %v\n%s\nlog:\n%s", err, where(bctx), s.logs.String())
	}
	critical, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('#dag g.node.crit').length`))
	if err != nil || critical != 3 {
		t.Errorf("%d nodes on the critical path (%v), want 3 (A, B, D)", critical, err)
	}
	err = chromedp.Do(step(t, bctx),
		chromedp.Click(css(`#dag g[id="t/D"] > path`)),
		chromedp.WaitVisible(css(`#tool-panel[data-tool="D"]`)),
	)
	if err != nil {
		t.Fatalf("D's panel: %v", err)
	}
	panel, err := chromedp.Run(bctx, chromedp.Text(css(`#tool-panel`)))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Lisbon", "succeeded", "Attempts"} {
		if !strings.Contains(panel, want) {
			t.Errorf("D's panel has no %q:\n%s", want, panel)
		}
	}
	// The diamond's request, run again from its page: a new request,
	// opened in its place, that succeeds.
	err = chromedp.Do(step(t, bctx),
		chromedp.Navigate(s.srv.URL+"/requests/web-diamond"),
		chromedp.WaitVisible(css(`#rerun button`)),
		chromedp.Click(css(`#rerun button`)),
		chromedp.WaitVisible(css(`p.notice`)),
	)
	if err != nil {
		t.Fatalf("rerun from the request's page: %v\n%s", err, where(bctx))
	}
	rerunURL, err := chromedp.Run(bctx, chromedp.Location())
	if err != nil || !strings.Contains(rerunURL, "/requests/") || strings.Contains(rerunURL, "/requests/web-diamond") {
		t.Fatalf("after the rerun the browser is at %q (%v), want the new request's page", rerunURL, err)
	}
	if err := settle(step(t, bctx), chromedp.WaitVisible(css(`#facts[data-status="succeeded"]`))); err != nil {
		t.Fatalf("the rerun did not succeed: %v\n%s\nlog:\n%s", err, where(bctx), s.logs.String())
	}
	if n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('#rerun-failed').length`)); err != nil || n != 0 {
		t.Errorf("a request that succeeded offers to rerun what did not succeed (%d, %v)", n, err)
	}

	if *updateScreenshot {
		png, err := chromedp.Run(bctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("../../docs/web.png", png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// A required tool fails for good: its node turns failed, its
	// dependent is skipped, and its panel shows the error.
	failing := string(readPlan(t, "required-failure.json"))
	err = chromedp.Do(step(t, bctx),
		chromedp.Navigate(s.srv.URL+"/submit"),
		chromedp.SetValue(css(`#document`), strings.Replace(failing, "{", `{"planId": "web-fail",`, 1)),
		chromedp.Click(css(`#send`)),
	)
	if err != nil {
		t.Fatalf("submitting the failing plan: %v\n%s", err, where(bctx))
	}
	openPlan(t, bctx)
	err = settle(step(t, bctx),
		chromedp.WaitReady(css(`#dag g[id="t/B"].st-failed`)),
		chromedp.WaitReady(css(`#dag g[id="t/C"].st-skipped`)),
		chromedp.WaitVisible(css(`#facts[data-state="failed"]`)),
	)
	if err != nil {
		t.Fatalf("the failing plan in the browser: %v\n%s\nlog:\n%s", err, where(bctx), s.logs.String())
	}
	err = chromedp.Do(step(t, bctx),
		chromedp.Click(css(`#dag g[id="t/B"] > path`)),
		chromedp.WaitVisible(css(`#tool-panel[data-tool="B"] .tool-error`)),
	)
	if err != nil {
		t.Fatalf("the failing plan in the browser: %v\n%s\nlog:\n%s", err, where(bctx), s.logs.String())
	}
	errText, err := chromedp.Run(bctx, chromedp.Text(css(`#tool-panel .tool-error`)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errText, "the bridge is out") {
		t.Errorf("B's error in its panel: %q, want the bridge is out", errText)
	}
}

// where says what the browser shows, for a test that failed in it.
func where(bctx context.Context) string {
	ctx, cancel := context.WithTimeout(bctx, 5*time.Second)
	defer cancel()
	url, _ := chromedp.Run(ctx, chromedp.Location())
	html, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	return "at " + url + ":\n" + html
}

// step bounds one step of the browser test: a minute, which a page that
// works needs a small part of.
func step(t *testing.T, bctx context.Context) context.Context {
	ctx, cancel := context.WithTimeout(bctx, time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// settle runs actions on a live page, which reloads itself when what it
// shows changes: an action that fails because the page went away under
// it is run again, with the others, on the page that replaced it, until
// they succeed or the step's time is up.
func settle(ctx context.Context, actions ...chromedp.Action[chromedp.Void]) error {
	for {
		err := chromedp.Do(ctx, actions...)
		if err == nil || ctx.Err() != nil {
			return err
		}
	}
}

// openPlan follows the plan link of the request's page, which reloads
// itself until the request has a plan.
func openPlan(t *testing.T, bctx context.Context) {
	t.Helper()
	ctx := step(t, bctx)
	for {
		// The request's page with its plan link, or the plan's page.
		err := settle(ctx, chromedp.WaitVisible(chromedp.CSS(`#plan-link, #dag svg`)))
		url, _ := chromedp.Run(ctx, chromedp.Location())
		if err == nil && strings.Contains(url, "/plans/") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no plan page: %v\n%s", err, where(bctx))
		}
		_ = chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#plan-link`)))
	}
	if err := settle(ctx, chromedp.WaitVisible(chromedp.CSS(`#dag svg`))); err != nil {
		t.Fatalf("the plan's DAG: %v\n%s", err, where(bctx))
	}
}
