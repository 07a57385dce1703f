package skills

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/planbus/planbus/internal/plan"
)

// HTTPConfig configures the http skill.
type HTTPConfig struct {
	// AllowHosts lists the hosts requests and their redirects may go to,
	// each "host" (any port) or "host:port". Empty allows any host.
	AllowHosts []string
	// BodyCap caps the response body kept, in bytes. Default 1 MiB.
	BodyCap int
}

// DefaultBodyCap is HTTPConfig.BodyCap's default.
const DefaultBodyCap = 1 << 20

// Codes of http errors besides HTTP_<status> and TOOL_TIMEOUT.
const (
	CodeHTTPNetwork         = "HTTP_NETWORK"
	CodeHTTPTLS             = "HTTP_TLS"
	CodeHTTPRedirectRefused = "HTTP_REDIRECT_REFUSED"
)

const maxRedirects = 10

const httpInputSchema = `{
	"type": "object",
	"required": ["url"],
	"properties": {
		"method": {"type": "string", "default": "GET"},
		"url": {"type": "string", "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://"},
		"headers": {"type": "object", "additionalProperties": {"type": "string"}},
		"body": {"description": "A string is sent as it is; any other JSON value is sent as application/json."},
		"timeoutMs": {"type": "integer", "minimum": 0, "description": "0 means only the call's deadline applies."}
	},
	"additionalProperties": false
}`

// HTTP makes one HTTP or HTTPS request per call.
//
// Input: {"method": "GET", "url": "https://...", "headers": {"K": "V"},
// "body": ..., "timeoutMs": N}; only url is required. A string body is
// sent as it is; any other JSON value is sent as JSON with Content-Type
// application/json unless the headers set one. timeoutMs bounds the
// request further than the call's own deadline.
//
// With cfg.AllowHosts set, the url's host and every redirect's must be on
// it. Redirects are followed up to 10 times.
//
// Output: {"status": 200, "headers": {"Content-Type": "..."}, "body": ...,
// "truncated": bool}. headers keeps each header's first value. body is the
// parsed JSON value if the response says it is JSON and the first
// cfg.BodyCap bytes parse, else those bytes as a string; truncated says
// whether the body was longer than that.
//
// Errors: a 2xx or 3xx status succeeds. 429 and 5xx are *Error with code
// HTTP_<status> and category transient, other 4xx the same with category
// permanent; both carry the output above. Connection failures are category
// network, code HTTP_NETWORK; certificate failures category permanent,
// code HTTP_TLS; a redirect to a host not allowed is category permanent,
// code HTTP_REDIRECT_REFUSED. Running out of time is category timeout, code
// TOOL_TIMEOUT. A bad input or a host not allowed is invalid input. When
// ctx is cancelled, HTTP returns ctx.Err().
//
// The skill's connections are pooled and shared by its concurrent calls.
func HTTP(cfg HTTPConfig) Skill {
	s := &httpSkill{allow: parseAllowHosts(cfg.AllowHosts), bodyCap: cfg.BodyCap}
	if s.bodyCap <= 0 {
		s.bodyCap = DefaultBodyCap
	}
	s.client = &http.Client{
		Transport: &http.Transport{
			Proxy:                  http.ProxyFromEnvironment,
			DialContext:            (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			ForceAttemptHTTP2:      true,
			MaxIdleConns:           100,
			MaxIdleConnsPerHost:    16,
			IdleConnTimeout:        90 * time.Second,
			TLSHandshakeTimeout:    10 * time.Second,
			ExpectContinueTimeout:  time.Second,
			MaxResponseHeaderBytes: 1 << 20,
		},
		CheckRedirect: s.checkRedirect,
	}
	return Skill{
		Manifest: Manifest{
			Name:        "http",
			Description: "Makes an HTTP request and returns the status, headers and body.",
			Version:     "1",
			Parameters:  []string{"method", "url"},
			InputSchema: json.RawMessage(httpInputSchema),
		},
		Handler: HandlerFunc(s.handle),
	}
}

type httpSkill struct {
	allow   []hostRule
	bodyCap int
	client  *http.Client
}

// hostRule matches a host, and its port unless port is empty.
type hostRule struct{ host, port string }

func parseAllowHosts(hosts []string) []hostRule {
	var rules []hostRule
	for _, h := range hosts {
		h = strings.ToLower(strings.TrimSpace(h))
		if host, port, err := net.SplitHostPort(h); err == nil {
			rules = append(rules, hostRule{strings.TrimSuffix(host, "."), port})
		} else {
			rules = append(rules, hostRule{strings.TrimSuffix(strings.Trim(h, "[]"), "."), ""})
		}
	}
	return rules
}

func (s *httpSkill) allowed(u *url.URL) bool {
	if len(s.allow) == 0 {
		return true
	}
	host, port := strings.TrimSuffix(strings.ToLower(u.Hostname()), "."), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	for _, r := range s.allow {
		if r.host == host && (r.port == "" || r.port == port) {
			return true
		}
	}
	return false
}

func (s *httpSkill) allowList() string {
	names := make([]string, len(s.allow))
	for i, r := range s.allow {
		names[i] = r.host
		if r.port != "" {
			names[i] = net.JoinHostPort(r.host, r.port)
		}
	}
	return strings.Join(names, ", ")
}

func (s *httpSkill) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return Failf(plan.CategoryPermanent, CodeHTTPRedirectRefused, "http: %s: stopped after %d redirects", via[0].URL.Redacted(), maxRedirects)
	}
	if !s.allowed(req.URL) {
		return Failf(plan.CategoryPermanent, CodeHTTPRedirectRefused,
			"http: %s redirected to host %q, which is not allowed (allowed: %s); add it to the worker's --http-allow",
			via[0].URL.Redacted(), req.URL.Host, s.allowList())
	}
	return nil
}

type httpInput struct {
	Method    string            `json:"method"`
	URL       string            `json:"url"`
	Headers   map[string]string `json:"headers"`
	Body      json.RawMessage   `json:"body"`
	TimeoutMs int64             `json:"timeoutMs"`
}

type httpOutput struct {
	Status    int               `json:"status"`
	Headers   map[string]string `json:"headers"`
	Body      any               `json:"body"`
	Truncated bool              `json:"truncated"`
}

func (s *httpSkill) handle(ctx context.Context, call *plan.ToolCall) (Result, error) {
	var in httpInput
	if err := DecodeInput(call, &in); err != nil {
		return Result{}, err
	}
	req, err := s.request(in)
	if err != nil {
		return Result{}, err
	}
	reqCtx := ctx
	if in.TimeoutMs > 0 {
		var cancel context.CancelFunc
		reqCtx, cancel = context.WithTimeout(ctx, time.Duration(in.TimeoutMs)*time.Millisecond)
		defer cancel()
	}
	req = req.WithContext(reqCtx)
	what := req.Method + " " + req.URL.Redacted()

	resp, err := s.client.Do(req)
	if err != nil {
		return Result{}, s.failure(ctx, reqCtx, in, what, err)
	}
	defer resp.Body.Close()
	body, truncated, err := readCapped(resp.Body, s.bodyCap)
	if err != nil {
		return Result{}, s.failure(ctx, reqCtx, in, what, fmt.Errorf("reading the body: %w", err))
	}

	out := httpOutput{Status: resp.StatusCode, Headers: make(map[string]string, len(resp.Header)), Body: string(body), Truncated: truncated}
	for k, v := range resp.Header {
		if len(v) > 0 {
			out.Headers[k] = v[0]
		}
	}
	if !truncated && isJSON(resp.Header.Get("Content-Type")) && json.Valid(body) {
		out.Body = json.RawMessage(body)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return Result{}, err
	}

	var category string
	switch code := resp.StatusCode; {
	case code < 400:
		return Result{Output: b}, nil
	case code == http.StatusTooManyRequests || code >= 500:
		category = plan.CategoryTransient
	default:
		category = plan.CategoryPermanent
	}
	msg := fmt.Sprintf("http: %s: %s", what, resp.Status)
	if line := firstLine(body, 200); line != "" {
		msg += ": " + line
	}
	return Result{}, &Error{Code: fmt.Sprintf("HTTP_%d", resp.StatusCode), Category: category, Message: msg, Output: b}
}

// request checks the input and builds the request, without its context.
func (s *httpSkill) request(in httpInput) (*http.Request, error) {
	if in.URL == "" {
		return nil, InvalidInput("http: url is required, as in {\"url\": \"https://example.com/\"}")
	}
	u, err := url.Parse(in.URL)
	if err != nil {
		return nil, InvalidInput("http: url: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, InvalidInput("http: url %q: scheme %q is not supported; use http or https", u.Redacted(), u.Scheme)
	}
	if u.Host == "" {
		return nil, InvalidInput("http: url %q has no host", u.Redacted())
	}
	if !s.allowed(u) {
		return nil, InvalidInput("http: host %q is not allowed (allowed: %s); add it to the worker's --http-allow", u.Host, s.allowList())
	}
	if in.TimeoutMs < 0 {
		return nil, InvalidInput("http: timeoutMs is %d, want >= 0", in.TimeoutMs)
	}
	method := strings.ToUpper(in.Method)
	if method == "" {
		method = http.MethodGet
	}
	if !isToken(method) {
		return nil, InvalidInput("http: method %q is not a valid HTTP method", in.Method)
	}

	var body io.Reader
	var contentType string
	switch raw := bytes.TrimSpace(in.Body); {
	case len(raw) == 0 || string(raw) == "null":
	case raw[0] == '"':
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return nil, InvalidInput("http: body: %v", err)
		}
		body = strings.NewReader(text)
	default:
		body = bytes.NewReader(raw)
		contentType = "application/json"
	}

	req, err := http.NewRequest(method, u.String(), body)
	if err != nil {
		return nil, InvalidInput("http: %v", err)
	}
	for k, v := range in.Headers {
		if !isToken(k) {
			return nil, InvalidInput("http: header name %q is not valid", k)
		}
		if !validHeaderValue(v) {
			return nil, InvalidInput("http: header %s: value has control characters", k)
		}
		if strings.EqualFold(k, "Host") {
			if !validHost(v) {
				return nil, InvalidInput("http: header Host: %q is not a host", v)
			}
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	if contentType != "" && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", contentType)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "planbus-http/1")
	}
	return req, nil
}

// failure classifies an error from sending the request or reading its
// response.
func (s *httpSkill) failure(ctx, reqCtx context.Context, in httpInput, what string, err error) error {
	var se *Error
	if errors.As(err, &se) {
		return se // refused by checkRedirect
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return ctx.Err()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its text repeats the method and url
	}
	var ne net.Error
	if reqCtx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		if in.TimeoutMs > 0 && ctx.Err() == nil {
			return Failf(plan.CategoryTimeout, plan.CodeToolTimeout, "http: %s: no response within timeoutMs %d: %v", what, in.TimeoutMs, err)
		}
		return Failf(plan.CategoryTimeout, plan.CodeToolTimeout, "http: %s: timed out: %v", what, err)
	}
	var cve *tls.CertificateVerificationError
	if errors.As(err, &cve) {
		return Failf(plan.CategoryPermanent, CodeHTTPTLS, "http: %s: %v", what, err)
	}
	return Failf(plan.CategoryNetwork, CodeHTTPNetwork, "http: %s: %v", what, err)
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// isToken reports whether s is an RFC 9110 token, as methods and header
// names must be.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

func validHost(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~:[]%!$&'()*+,;=", c) >= 0) {
			return false
		}
	}
	return true
}
