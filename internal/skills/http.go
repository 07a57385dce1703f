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
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/skill"
)

// HTTPConfig configures the http skill.
type HTTPConfig struct {
	// AllowHosts lists the hosts requests and their redirects may go to,
	// each "host" (any port) or "host:port". Empty allows any host, at an
	// address the address rule (AllowPrivate) allows.
	AllowHosts []string
	// AllowPrivate lets requests connect to loopback, private (RFC 1918,
	// unique-local), shared (CGNAT) and special-purpose addresses, which
	// are refused by default. Link-local addresses, where cloud metadata
	// services listen, need AllowPrivate and a non-empty AllowHosts, so
	// that only hosts named there reach them. Unspecified, multicast,
	// broadcast and reserved addresses are always refused.
	AllowPrivate bool
	// BodyCap caps the response body kept, in bytes. Default 512 KiB.
	BodyCap int
	// OutputCap is the largest output the skill returns, in bytes: the
	// body is cut further, and truncated set, when the output would be
	// larger. It should be the worker's OutputCap. Default 1 MiB, the
	// worker's default.
	OutputCap int
}

// Defaults of HTTPConfig.BodyCap and HTTPConfig.OutputCap.
const (
	DefaultBodyCap       = 512 << 10
	DefaultHTTPOutputCap = 1 << 20
)

// maxHeaderBytes caps the response headers the transport reads, so that
// headers cannot crowd the body out of the output.
const maxHeaderBytes = 64 << 10

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
// Where a request may go: with cfg.AllowHosts set, the url's host and
// every redirect's must be on it. Whatever the host, the address each
// connection is actually made to (after DNS, for the url, every redirect
// and every retry of a pooled connection) must pass the address rule of
// cfg.AllowPrivate: by default loopback, private, shared, link-local
// (169.254.169.254 among them), unique-local, unspecified, multicast,
// broadcast and reserved addresses, and IPv4-mapped or embedded forms of
// them, are refused. The rule is checked by the dialer, so DNS rebinding,
// redirects and "user@host" tricks meet it too. Proxy settings of the
// worker's environment (HTTP_PROXY...) are not used: a proxy would dial
// on the skill's behalf where the rule cannot see. Redirects are
// followed up to 10 times.
//
// Output: {"status": 200, "headers": {"Content-Type": "..."}, "body": ...,
// "truncated": bool}. headers keeps each header's first value. body is the
// parsed JSON value if the response says it is JSON and the first
// cfg.BodyCap bytes parse, else those bytes as a string; truncated says
// whether the body was longer than that, or was cut further so that the
// whole output fits in cfg.OutputCap.
//
// Errors: a 2xx or 3xx status succeeds. 429 and 5xx are *Error with code
// HTTP_<status> and category transient, other 4xx the same with category
// permanent; both carry the output above. Connection failures are category
// network, code HTTP_NETWORK; certificate failures category permanent,
// code HTTP_TLS; a redirect to a host not allowed is category permanent,
// code HTTP_REDIRECT_REFUSED; an address the rule refuses is category
// permanent, code HTTP_ADDRESS_REFUSED, naming the host, the address and
// the flag that would allow it. Running out of time is category timeout,
// code TOOL_TIMEOUT. A bad input or a host not allowed is invalid input.
// When ctx is cancelled, HTTP returns ctx.Err().
//
// The skill's connections are pooled and shared by its concurrent calls.
func HTTP(cfg HTTPConfig) skill.Skill {
	s := &httpSkill{allow: parseAllowHosts(cfg.AllowHosts), allowPrivate: cfg.AllowPrivate,
		bodyCap: cfg.BodyCap, outputCap: cfg.OutputCap}
	if s.bodyCap <= 0 {
		s.bodyCap = DefaultBodyCap
	}
	if s.outputCap <= 0 {
		s.outputCap = DefaultHTTPOutputCap
	}
	s.dialer = &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: s.control}
	s.client = &http.Client{
		Transport: &http.Transport{
			DialContext:            s.dial,
			ForceAttemptHTTP2:      true,
			MaxIdleConns:           100,
			MaxIdleConnsPerHost:    16,
			IdleConnTimeout:        90 * time.Second,
			TLSHandshakeTimeout:    10 * time.Second,
			ExpectContinueTimeout:  time.Second,
			MaxResponseHeaderBytes: maxHeaderBytes,
		},
		CheckRedirect: s.checkRedirect,
	}
	return skill.Skill{
		Manifest: skill.Manifest{
			Name:        "http",
			Description: "Makes an HTTP request and returns the status, headers and body.",
			Version:     "1",
			Parameters:  []string{"method", "url"},
			InputSchema: json.RawMessage(httpInputSchema),
		},
		Handler: skill.HandlerFunc(s.handle),
	}
}

type httpSkill struct {
	allow        []hostRule
	allowPrivate bool
	bodyCap      int
	outputCap    int
	dialer       *net.Dialer
	client       *http.Client
}

// control runs after DNS, before each connection is made: it sees the
// address actually dialed.
func (s *httpSkill) control(network, address string, _ syscall.RawConn) error {
	switch network {
	case "tcp4", "tcp6":
	default:
		return fmt.Errorf("http: network %s is not allowed", network)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("http: dialing %q: %w", address, err)
	}
	return checkAddr(ap.Addr(), s.allowPrivate, len(s.allow) > 0)
}

// dial connects to addr (host:port) and, when the address rule refused
// every address addr's host resolves to, says which host that was.
func (s *httpSkill) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := s.dialer.DialContext(ctx, network, addr)
	var re *addrRefusedError
	if err != nil && errors.As(err, &re) {
		refused := *re
		refused.host, _, _ = net.SplitHostPort(addr)
		return nil, &refused
	}
	return conn, err
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
		return skill.Failf(planbus.CodeHTTPRedirectRefused, planbus.CategoryPermanent, "http: %s: stopped after %d redirects", via[0].URL.Redacted(), maxRedirects)
	}
	if !s.allowed(req.URL) {
		return skill.Failf(planbus.CodeHTTPRedirectRefused, planbus.CategoryPermanent,
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

func (s *httpSkill) handle(ctx context.Context, call *skill.Call) (skill.Result, error) {
	var in httpInput
	if err := skill.DecodeInput(call, &in); err != nil {
		return skill.Result{}, err
	}
	req, err := s.request(in)
	if err != nil {
		return skill.Result{}, err
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
		return skill.Result{}, s.failure(ctx, reqCtx, in, what, err)
	}
	defer resp.Body.Close()
	body, truncated, err := readCapped(resp.Body, s.bodyCap)
	if err != nil {
		return skill.Result{}, s.failure(ctx, reqCtx, in, what, fmt.Errorf("reading the body: %w", err))
	}

	headers := make(map[string]string, len(resp.Header))
	for k, v := range resp.Header {
		if len(v) > 0 {
			headers[k] = v[0]
		}
	}
	jsonBody := !truncated && isJSON(resp.Header.Get("Content-Type")) && json.Valid(body)
	b, err := s.encode(httpOutput{Status: resp.StatusCode, Headers: headers, Truncated: truncated}, body, jsonBody)
	if err != nil {
		return skill.Result{}, err
	}

	var category planbus.Category
	switch code := resp.StatusCode; {
	case code < 400:
		return skill.Result{Output: b}, nil
	case code == http.StatusTooManyRequests || code >= 500:
		category = planbus.CategoryTransient
	default:
		category = planbus.CategoryPermanent
	}
	msg := fmt.Sprintf("http: %s: %s", what, resp.Status)
	if line := firstLine(body, 200); line != "" {
		msg += ": " + line
	}
	return skill.Result{}, &skill.Error{Code: planbus.CodeHTTPStatus(resp.StatusCode), Category: category, Message: msg, Output: b}
}

// encode returns out with body as its body, as JSON of at most
// s.outputCap bytes: the JSON value itself when jsonBody says body is one
// and it fits, else body as a string, cut at a character boundary until it
// fits, with truncated set when anything was cut. HTML characters are not
// escaped, so a body does not grow sixfold.
func (s *httpSkill) encode(out httpOutput, body []byte, jsonBody bool) ([]byte, error) {
	if jsonBody {
		out.Body = json.RawMessage(body)
		b, err := marshalPlain(out)
		if err != nil || len(b) <= s.outputCap {
			return b, err
		}
	}
	out.Body = ""
	b, err := marshalPlain(out)
	if err != nil {
		return nil, err
	}
	if len(b) > s.outputCap {
		// The headers alone do not fit; keep the status.
		out.Headers = map[string]string{}
		if b, err = marshalPlain(out); err != nil {
			return nil, err
		}
		out.Truncated = true
	}
	n := jsonPrefix(body, s.outputCap-len(b))
	if n < len(body) {
		out.Truncated = true
	}
	out.Body = string(body[:n])
	return marshalPlain(out)
}

// marshalPlain is json.Marshal without HTML escaping and without the
// encoder's trailing newline.
func marshalPlain(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// jsonPrefix returns the length of the longest prefix of b, ending at a
// character boundary, whose JSON string encoding without HTML escaping
// takes at most room bytes more than the two quotes: each byte counts as
// encoding/json writes it.
func jsonPrefix(b []byte, room int) int {
	used := 0
	for i := 0; i < len(b); {
		c := b[i]
		size, cost := 1, 1
		switch {
		case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
			cost = 2
		case c < 0x20:
			cost = 6 // \u00XX
		case c >= utf8.RuneSelf:
			var r rune
			r, size = utf8.DecodeRune(b[i:])
			switch {
			case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
				cost = 6 // \ufffd, \u2028, \u2029
			default:
				cost = size
			}
		}
		if used+cost > room {
			return i
		}
		used += cost
		i += size
	}
	return len(b)
}

// request checks the input and builds the request, without its context.
func (s *httpSkill) request(in httpInput) (*http.Request, error) {
	if in.URL == "" {
		return nil, skill.InvalidInput("http: url is required, as in {\"url\": \"https://example.com/\"}")
	}
	u, err := url.Parse(in.URL)
	if err != nil {
		return nil, skill.InvalidInput("http: url: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, skill.InvalidInput("http: url %q: scheme %q is not supported; use http or https", u.Redacted(), u.Scheme)
	}
	if u.Host == "" {
		return nil, skill.InvalidInput("http: url %q has no host", u.Redacted())
	}
	if !s.allowed(u) {
		return nil, skill.InvalidInput("http: host %q is not allowed (allowed: %s); add it to the worker's --http-allow", u.Host, s.allowList())
	}
	if in.TimeoutMs < 0 {
		return nil, skill.InvalidInput("http: timeoutMs is %d, want >= 0", in.TimeoutMs)
	}
	method := strings.ToUpper(in.Method)
	if method == "" {
		method = http.MethodGet
	}
	if !isToken(method) {
		return nil, skill.InvalidInput("http: method %q is not a valid HTTP method", in.Method)
	}

	var body io.Reader
	var contentType string
	switch raw := bytes.TrimSpace(in.Body); {
	case len(raw) == 0 || string(raw) == "null":
	case raw[0] == '"':
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return nil, skill.InvalidInput("http: body: %v", err)
		}
		body = strings.NewReader(text)
	default:
		body = bytes.NewReader(raw)
		contentType = "application/json"
	}

	req, err := http.NewRequest(method, u.String(), body)
	if err != nil {
		return nil, skill.InvalidInput("http: %v", err)
	}
	for k, v := range in.Headers {
		if !isToken(k) {
			return nil, skill.InvalidInput("http: header name %q is not valid", k)
		}
		if !validHeaderValue(v) {
			return nil, skill.InvalidInput("http: header %s: value has control characters", k)
		}
		if strings.EqualFold(k, "Host") {
			if !validHost(v) {
				return nil, skill.InvalidInput("http: header Host: %q is not a host", v)
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
	var se *skill.Error
	if errors.As(err, &se) {
		return se // refused by checkRedirect
	}
	var re *addrRefusedError
	if errors.As(err, &re) {
		return skill.Failf(planbus.CodeHTTPAddressRefused, planbus.CategoryPermanent, "http: %s: %v", what, re)
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
			return skill.Failf(planbus.CodeToolTimeout, planbus.CategoryTimeout, "http: %s: no response within timeoutMs %d: %v", what, in.TimeoutMs, err)
		}
		return skill.Failf(planbus.CodeToolTimeout, planbus.CategoryTimeout, "http: %s: timed out: %v", what, err)
	}
	var cve *tls.CertificateVerificationError
	if errors.As(err, &cve) {
		return skill.Failf(planbus.CodeHTTPTLS, planbus.CategoryPermanent, "http: %s: %v", what, err)
	}
	return skill.Failf(planbus.CodeHTTPNetwork, planbus.CategoryNetwork, "http: %s: %v", what, err)
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
