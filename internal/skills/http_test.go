package skills_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/skill"
)

type httpOutput struct {
	Status    int               `json:"status"`
	Headers   map[string]string `json:"headers"`
	Body      json.RawMessage   `json:"body"`
	Truncated bool              `json:"truncated"`
}

func decodeHTTP(t *testing.T, raw json.RawMessage) httpOutput {
	t.Helper()
	var out httpOutput
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("output %s: %v", raw, err)
	}
	return out
}

func newServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func hostPort(srv *httptest.Server) string { return strings.TrimPrefix(srv.URL, "http://") }

// local lets the skill reach the test servers, which listen on 127.0.0.1:
// loopback addresses are refused by default.
var local = skills.HTTPConfig{AllowPrivate: true}

// callHTTP calls the http skill with input, which is marshalled to JSON.
func callHTTP(ctx context.Context, t *testing.T, cfg skills.HTTPConfig, input any) (skill.Result, error) {
	t.Helper()
	b, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	return skills.HTTP(cfg).Handler.Handle(ctx, newCall("http", string(b)))
}

// jsonDiff reports, as a diff, whether two JSON texts hold the same value.
func jsonDiff(t *testing.T, want string, got json.RawMessage) string {
	t.Helper()
	var w, g any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want %s: %v", want, err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got %s: %v", got, err)
	}
	return cmp.Diff(w, g)
}

func TestHTTPRequest(t *testing.T) {
	// The server answers with what it received.
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_ = json.NewEncoder(w).Encode(map[string]string{
			"method": r.Method, "path": r.URL.RequestURI(), "contentType": r.Header.Get("Content-Type"),
			"xTest": r.Header.Get("X-Test"), "userAgent": r.Header.Get("User-Agent"), "host": r.Host, "body": string(b),
		})
	})
	host := hostPort(srv)
	tests := []struct {
		name  string
		input map[string]any
		want  string // the JSON the server echoes
	}{
		{"GET by default", map[string]any{"url": srv.URL + "/a?b=c"},
			`{"method":"GET","path":"/a?b=c","contentType":"","xTest":"","userAgent":"planbus-http/1","host":"` + host + `","body":""}`},
		{"POST a JSON value", map[string]any{"method": "post", "url": srv.URL, "body": map[string]any{"k": []int{1, 2}}},
			`{"method":"POST","path":"/","contentType":"application/json","xTest":"","userAgent":"planbus-http/1","host":"` + host + `","body":"{\"k\":[1,2]}"}`},
		{"PUT a JSON number", map[string]any{"method": "PUT", "url": srv.URL, "body": 42},
			`{"method":"PUT","path":"/","contentType":"application/json","xTest":"","userAgent":"planbus-http/1","host":"` + host + `","body":"42"}`},
		{"a string body is sent as it is", map[string]any{"method": "POST", "url": srv.URL, "body": `{"not":"parsed"} $(id)`,
			"headers": map[string]string{"Content-Type": "text/plain"}},
			`{"method":"POST","path":"/","contentType":"text/plain","xTest":"","userAgent":"planbus-http/1","host":"` + host + `","body":"{\"not\":\"parsed\"} $(id)"}`},
		{"headers", map[string]any{"url": srv.URL, "headers": map[string]string{"X-Test": "yes", "User-Agent": "tester", "Host": "api.example"}},
			`{"method":"GET","path":"/","contentType":"","xTest":"yes","userAgent":"tester","host":"api.example","body":""}`},
		{"a JSON body keeps an explicit content type", map[string]any{"method": "PATCH", "url": srv.URL, "body": []string{"x"},
			"headers": map[string]string{"content-type": "application/merge-patch+json"}},
			`{"method":"PATCH","path":"/","contentType":"application/merge-patch+json","xTest":"","userAgent":"planbus-http/1","host":"` + host + `","body":"[\"x\"]"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := callHTTP(t.Context(), t, local, tt.input)
			if err != nil {
				t.Fatalf("got error %v", err)
			}
			out := decodeHTTP(t, res.Output)
			if out.Status != http.StatusOK || out.Truncated {
				t.Errorf("got status %d, truncated %v; want 200, false", out.Status, out.Truncated)
			}
			if diff := jsonDiff(t, tt.want, out.Body); diff != "" {
				t.Errorf("what the server received (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHTTPResponse(t *testing.T) {
	tests := []struct {
		name        string
		contentType string
		body        string
		wantBody    string // JSON of the output's body
	}{
		{"JSON is parsed", "application/json", `{"a":[1,true,null]}`, `{"a":[1,true,null]}`},
		{"JSON with parameters", "application/json; charset=utf-8", `[1,2]`, `[1,2]`},
		{"a +json type", "application/problem+json", `{"title":"x"}`, `{"title":"x"}`},
		{"text stays a string", "text/plain", `hello`, `"hello"`},
		{"JSON-looking text stays a string", "text/plain", `{"a":1}`, `"{\"a\":1}"`},
		{"malformed JSON stays a string", "application/json", `{"a":`, `"{\"a\":"`},
		{"empty JSON body", "application/json", ``, `""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				w.Header().Add("X-Multi", "first")
				w.Header().Add("X-Multi", "second")
				_, _ = io.WriteString(w, tt.body)
			})
			res, err := callHTTP(t.Context(), t, local, map[string]any{"url": srv.URL})
			if err != nil {
				t.Fatalf("got error %v", err)
			}
			out := decodeHTTP(t, res.Output)
			if diff := jsonDiff(t, tt.wantBody, out.Body); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			for k, want := range map[string]string{"Content-Type": tt.contentType, "X-Multi": "first"} {
				if got := out.Headers[k]; got != want {
					t.Errorf("header %s: got %q, want %q", k, got, want)
				}
			}
		})
	}
}

func TestHTTPStatus(t *testing.T) {
	tests := []struct {
		status   int
		category planbus.Category // empty = success
	}{
		{http.StatusOK, ""},
		{http.StatusNoContent, ""},
		{http.StatusNotModified, ""},
		{http.StatusBadRequest, planbus.CategoryPermanent},
		{http.StatusNotFound, planbus.CategoryPermanent},
		{http.StatusConflict, planbus.CategoryPermanent},
		{http.StatusTooManyRequests, planbus.CategoryTransient},
		{http.StatusInternalServerError, planbus.CategoryTransient},
		{http.StatusServiceUnavailable, planbus.CategoryTransient},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, `{"error":"said the server"}`)
			})
			res, err := callHTTP(t.Context(), t, local, map[string]any{"url": srv.URL + "/thing"})
			if tt.category == "" {
				if err != nil {
					t.Fatalf("got error %v, want success", err)
				}
				if out := decodeHTTP(t, res.Output); out.Status != tt.status {
					t.Errorf("got status %d, want %d", out.Status, tt.status)
				}
				return
			}
			se := wantError(t, err, tt.category, planbus.CodeHTTPStatus(tt.status))
			wantMessage(t, err, "GET "+srv.URL+"/thing", http.StatusText(tt.status), `{"error":"said the server"}`)
			out := decodeHTTP(t, se.Output)
			if out.Status != tt.status {
				t.Errorf("error output: got status %d, want %d", out.Status, tt.status)
			}
			if diff := jsonDiff(t, `{"error":"said the server"}`, out.Body); diff != "" {
				t.Errorf("error output body (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHTTPConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = callHTTP(t.Context(), t, local, map[string]any{"url": "http://" + addr + "/"})
	wantError(t, err, planbus.CategoryNetwork, planbus.CodeHTTPNetwork)
	wantMessage(t, err, "connection refused")
}

// slowServer answers only when the client gives up, and reports each
// request's arrival on the returned channel.
func slowServer(t *testing.T) (*httptest.Server, <-chan struct{}) {
	arrived := make(chan struct{}, 16)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	})
	return srv, arrived
}

func TestHTTPTimeout(t *testing.T) {
	t.Run("timeoutMs", func(t *testing.T) {
		srv, _ := slowServer(t)
		_, err := callHTTP(t.Context(), t, local, map[string]any{"url": srv.URL, "timeoutMs": 20})
		wantError(t, err, planbus.CategoryTimeout, planbus.CodeToolTimeout)
		wantMessage(t, err, "no response within timeoutMs 20")
	})

	t.Run("call deadline", func(t *testing.T) {
		srv, _ := slowServer(t)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		_, err := callHTTP(ctx, t, local, map[string]any{"url": srv.URL, "timeoutMs": 60_000})
		wantError(t, err, planbus.CategoryTimeout, planbus.CodeToolTimeout)
	})

	t.Run("cancelled", func(t *testing.T) {
		srv, arrived := slowServer(t)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := handleAsync(ctx, skills.HTTP(local).Handler, newCall("http", `{"url":"`+srv.URL+`"}`))
		await(t, arrived, "the request to arrive")
		cancel()
		o := await(t, done, "http to return after cancel")
		if !errors.Is(o.err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", o.err)
		}
		if info, _ := skill.ErrorInfo(o.err); info.Category != planbus.CategoryCancelled {
			t.Errorf("got category %s, want %s", info.Category, planbus.CategoryCancelled)
		}
	})
}

func TestHTTPAllowHosts(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	host := hostPort(srv)
	tests := []struct {
		name  string
		allow []string
		url   string
		ok    bool
	}{
		{"any host when empty", nil, srv.URL, true},
		{"host and port", []string{"example.com", host}, srv.URL, true},
		{"host, any port", []string{"127.0.0.1"}, srv.URL + "/x", true},
		{"host in capitals", []string{"LOCALHOST", "127.0.0.1"}, srv.URL, true},
		{"other host", []string{"example.com"}, srv.URL, false},
		{"other port", []string{"127.0.0.1:1"}, srv.URL, false},
		{"default port", []string{"127.0.0.1:80"}, srv.URL, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := callHTTP(t.Context(), t, skills.HTTPConfig{AllowHosts: tt.allow, AllowPrivate: true}, map[string]any{"url": tt.url})
			if !tt.ok {
				wantError(t, err, planbus.CategoryInvalidInput, planbus.CodeInvalidInput)
				wantMessage(t, err, `host "`+host+`" is not allowed`, "--http-allow")
				return
			}
			if err != nil {
				t.Fatalf("got error %v", err)
			}
			if out := decodeHTTP(t, res.Output); string(out.Body) != `"ok"` {
				t.Errorf("got body %s, want \"ok\"", out.Body)
			}
		})
	}
}

func TestHTTPInvalidInput(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  string
	}{
		{"no url", `{"method":"GET"}`, "url is required"},
		{"ftp", `{"url":"ftp://127.0.0.1/x"}`, `scheme "ftp" is not supported`},
		{"file", `{"url":"file:///etc/passwd"}`, `scheme "file" is not supported`},
		{"relative url", `{"url":"/just/a/path"}`, `scheme "" is not supported`},
		{"no host", `{"url":"http:///x"}`, "has no host"},
		{"bad url", `{"url":"http://[::1"}`, "http: url:"},
		{"bad method", `{"method":"GET /x","url":"http://127.0.0.1:1"}`, `method "GET /x" is not a valid HTTP method`},
		{"bad header name", `{"url":"http://127.0.0.1:1","headers":{"X Bad":"v"}}`, `header name "X Bad" is not valid`},
		{"header injection", `{"url":"http://127.0.0.1:1","headers":{"X-A":"v\r\nX-B: w"}}`, "header X-A: value has control characters"},
		{"bad Host header", `{"url":"http://127.0.0.1:1","headers":{"Host":"a/b"}}`, `header Host: "a/b" is not a host`},
		{"negative timeout", `{"url":"http://127.0.0.1:1","timeoutMs":-1}`, "timeoutMs is -1"},
		{"unknown field", `{"url":"http://127.0.0.1:1","query":{}}`, "unknown member /query"},
		{"headers not strings", `{"url":"http://127.0.0.1:1","headers":{"A":1}}`, "at /headers/A: got a number, want a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := skills.HTTP(skills.HTTPConfig{}).Handler.Handle(t.Context(), newCall("http", tt.input))
			wantError(t, err, planbus.CategoryInvalidInput, planbus.CodeInvalidInput)
			wantMessage(t, err, tt.want)
		})
	}
}

func TestHTTPBodyCap(t *testing.T) {
	tests := []struct {
		name        string
		cap         int
		contentType string
		size        int
		wantLen     int
		truncated   bool
	}{
		{"under the cap", 100, "text/plain", 100, 100, false},
		{"over the cap", 100, "text/plain", 5000, 100, true},
		{"truncated JSON stays a string", 10, "application/json", 50, 10, true},
		{"default cap", 0, "application/octet-stream", skills.DefaultBodyCap + 1, skills.DefaultBodyCap, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				body := strings.Repeat("x", tt.size)
				if tt.contentType == "application/json" {
					body = `"` + strings.Repeat("x", tt.size-2) + `"`
				}
				_, _ = io.WriteString(w, body)
			})
			res, err := callHTTP(t.Context(), t, skills.HTTPConfig{BodyCap: tt.cap, AllowPrivate: true}, map[string]any{"url": srv.URL})
			if err != nil {
				t.Fatalf("got error %v", err)
			}
			out := decodeHTTP(t, res.Output)
			var body string
			if err := json.Unmarshal(out.Body, &body); err != nil {
				t.Fatalf("body %.40s...: %v, want a string", out.Body, err)
			}
			if len(body) != tt.wantLen || out.Truncated != tt.truncated {
				t.Errorf("got %d bytes, truncated %v; want %d, %v", len(body), out.Truncated, tt.wantLen, tt.truncated)
			}
		})
	}
}

func TestHTTPRedirect(t *testing.T) {
	var elsewhereHits atomic.Int32
	elsewhere := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		elsewhereHits.Add(1)
		_, _ = io.WriteString(w, "should not be reached")
	})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, elsewhere.URL+"/x", http.StatusFound)
		case "/here":
			http.Redirect(w, r, "/final", http.StatusMovedPermanently)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		default:
			_, _ = io.WriteString(w, "arrived at "+r.URL.Path)
		}
	})
	cfg := skills.HTTPConfig{AllowHosts: []string{hostPort(srv)}, AllowPrivate: true}

	t.Run("to an allowed host", func(t *testing.T) {
		res, err := callHTTP(t.Context(), t, cfg, map[string]any{"url": srv.URL + "/here"})
		if err != nil {
			t.Fatalf("got error %v", err)
		}
		if out := decodeHTTP(t, res.Output); string(out.Body) != `"arrived at /final"` {
			t.Errorf("got body %s, want \"arrived at /final\"", out.Body)
		}
	})

	t.Run("to a host not allowed", func(t *testing.T) {
		_, err := callHTTP(t.Context(), t, cfg, map[string]any{"url": srv.URL + "/away"})
		wantError(t, err, planbus.CategoryPermanent, planbus.CodeHTTPRedirectRefused)
		wantMessage(t, err, `redirected to host "`+hostPort(elsewhere)+`", which is not allowed`, "--http-allow")
		if n := elsewhereHits.Load(); n != 0 {
			t.Errorf("the host not allowed got %d requests, want 0", n)
		}
	})

	t.Run("in a loop", func(t *testing.T) {
		_, err := callHTTP(t.Context(), t, cfg, map[string]any{"url": srv.URL + "/loop"})
		wantError(t, err, planbus.CategoryPermanent, planbus.CodeHTTPRedirectRefused)
		wantMessage(t, err, "stopped after 10 redirects")
	})
}

// FuzzHTTPInput feeds arbitrary input to an http skill that may only reach
// 127.0.0.1:1, where nothing listens: decoding must not panic, and every
// failure must carry a known category.
func FuzzHTTPInput(f *testing.F) {
	for _, seed := range []string{
		`{"url":"http://127.0.0.1:1/"}`, `{"method":"POST","url":"http://127.0.0.1:1/x","headers":{"A":"b"},"body":{"k":[1]},"timeoutMs":5}`,
		`{"url":"https://127.0.0.1:1","body":"text"}`, `{"url":"http://example.com/"}`, `{"url":"ftp://x"}`,
		`{"url":"http://127.0.0.1:1","headers":{"Host":"h"}}`, `{"url":"http://[::1"}`, `{}`, `null`, ``, `{"url":1}`,
	} {
		f.Add([]byte(seed))
	}
	sk := skills.HTTP(skills.HTTPConfig{AllowHosts: []string{"127.0.0.1:1"}, AllowPrivate: true})
	known := map[planbus.Category]bool{planbus.CategoryInvalidInput: true, planbus.CategoryNetwork: true, planbus.CategoryTimeout: true,
		planbus.CategoryPermanent: true, planbus.CategoryTransient: true}
	f.Fuzz(func(t *testing.T, input []byte) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		_, err := sk.Handler.Handle(ctx, &skill.Call{Skill: "http", Attempt: 1, Input: input})
		if err == nil {
			return // something answered on 127.0.0.1:1
		}
		if info, _ := skill.ErrorInfo(err); !known[info.Category] {
			t.Fatalf("input %q: got category %s (%s)", input, info.Category, info.Message)
		}
	})
}
