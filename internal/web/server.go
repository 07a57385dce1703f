package web

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/logbridge"
)

// Config of the view. The zero value serves the view without a login, to
// loopback Host names only.
type Config struct {
	// Token, when not empty, is asked of every visitor: given once (the
	// login form, or ?token= in a link, which is then taken out of the
	// address) it is kept in a cookie; scripts may send it as
	// "Authorization: Bearer <token>". Empty: no login.
	Token string
	// AnyHost serves requests whatever their Host header. By default a
	// view without a Token answers only requests addressed to a loopback
	// name (localhost, 127.0.0.1, [::1]), so that a web page cannot reach
	// it by pointing one of its own names at 127.0.0.1 (DNS rebinding).
	AnyHost bool
	// Version is shown at the foot of each page.
	Version string
	// GraphLimit is the most tools a plan may have for its DAG to be
	// drawn; larger plans are shown as a table. Default DefaultGraphLimit.
	GraphLimit int
	// Discovery is how long the system and skills pages collect the
	// answers of the micro services' instances. Default 300 ms.
	Discovery time.Duration
	// Approvals decides tools that wait for a person's approval. Default:
	// through the planner's planbus.plan.approve endpoint, on the view's
	// connection (ClientApprovals), as `planner approve` does.
	Approvals Approver
	// NoApprovals leaves Approve and Reject out: the view shows no
	// buttons and answers 404 on their routes.
	NoApprovals bool
	// MaxStreams bounds the live streams (server-sent events) served at
	// once; each holds a NATS subscription or two. Default 64.
	MaxStreams int
}

// Approver approves or rejects a tool that waits for a person's
// approval (a tool with an approval step). The plan page shows
// Approve and Reject for a tool whose Waiting is true, and posts the
// decision (with the CSRF token) to
// /plans/{planId}/tools/{toolId}/approve or .../reject, which calls
// Decide.
type Approver interface {
	// Waiting reports whether the tool waits for a decision.
	Waiting(ctx context.Context, planID, toolID string) (bool, error)
	// Decide approves or rejects the waiting tool.
	Decide(ctx context.Context, planID, toolID string, approve bool, reason string) error
}

func (c Config) withDefaults() Config {
	if c.GraphLimit == 0 {
		c.GraphLimit = DefaultGraphLimit
	}
	if c.Discovery == 0 {
		c.Discovery = 300 * time.Millisecond
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = 64
	}
	return c
}

// ErrInvalidConfig is matched by the errors of New about its Config.
var ErrInvalidConfig = errors.New("web: invalid config")

func (c Config) validate() error {
	switch {
	case c.GraphLimit < 0:
		return fmt.Errorf("%w: GraphLimit %d, want 0 (the default) or more", ErrInvalidConfig, c.GraphLimit)
	case c.Discovery < 0 || c.Discovery > time.Minute:
		return fmt.Errorf("%w: Discovery %s, want 0 (the default) to 1m", ErrInvalidConfig, c.Discovery)
	case c.MaxStreams < 0:
		return fmt.Errorf("%w: MaxStreams %d, want 0 (the default) or more", ErrInvalidConfig, c.MaxStreams)
	case c.Token != "" && len(c.Token) < 16:
		return fmt.Errorf("%w: Token of %d characters, want at least 16", ErrInvalidConfig, len(c.Token))
	}
	return nil
}

// Server is the web view: an http.Handler. Create it with New; Close it
// when done. It is safe for concurrent use.
type Server struct {
	cfg     Config
	log     zerolog.Logger
	src     *source
	cl      *client.Client
	nc      *nats.Conn
	draw    *renderer
	mux     *http.ServeMux
	handler http.Handler
	// secret signs the CSRF tokens; made at start, so a restart makes
	// the forms of open pages stale (they say so and can be sent again).
	secret  []byte
	session string // the cookie's value for the Token
	streams chan struct{}
	stop    context.CancelFunc
	ctx     context.Context
}

// New returns the view of the system nc is connected to. The connection
// stays the caller's. The view needs only what the client role may do:
// the planner's endpoints, reads of streams and buckets by subject or
// key, micro service discovery, and stream and consumer info (the
// system page).
func New(nc *nats.Conn, cfg Config, log zerolog.Logger) (*Server, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: no NATS connection", ErrInvalidConfig)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	pages() // parsed here rather than on the first page asked for
	cl, err := client.New(nc, client.WithLogger(logbridge.Slog(log)))
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	switch {
	case cfg.NoApprovals:
		cfg.Approvals = nil
	case cfg.Approvals == nil:
		cfg.Approvals = ClientApprovals{C: cl}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("web: jetstream: %w", err)
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, log: log.With().Str("component", "web").Logger(), cl: cl, nc: nc,
		src: &source{nc: nc, js: js, cl: cl, discovery: cfg.Discovery}, draw: newRenderer(32),
		secret: secret, streams: make(chan struct{}, cfg.MaxStreams), ctx: ctx, stop: stop}
	if cfg.Token != "" {
		s.session = sessionValue(cfg.Token)
	}
	s.routes()
	return s, nil
}

// Close ends the live streams being served. The Server must not be used
// after.
func (s *Server) Close() { s.stop() }

// ServeHTTP serves the view.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

func (s *Server) routes() {
	m := http.NewServeMux()
	m.Handle("GET /static/", http.StripPrefix("/static/", staticFiles()))
	m.HandleFunc("GET /login", s.loginPage)
	m.HandleFunc("POST /login", s.login)
	m.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/requests", http.StatusSeeOther) })
	m.HandleFunc("GET /requests", s.requestsPage)
	m.HandleFunc("GET /requests/{id}", s.requestPage)
	m.HandleFunc("POST /requests/{id}/cancel", s.cancel)
	m.HandleFunc("POST /requests/{id}/rerun", s.rerun)
	m.HandleFunc("GET /events", s.changes)
	m.HandleFunc("GET /plans/{id}", s.planPage)
	m.HandleFunc("GET /plans/{id}/events", s.planEvents)
	m.HandleFunc("GET /plans/{id}/tools/{tool}", s.toolPage)
	m.HandleFunc("POST /plans/{id}/tools/{tool}/approve", s.decide(true))
	m.HandleFunc("POST /plans/{id}/tools/{tool}/reject", s.decide(false))
	m.HandleFunc("GET /skills", s.skillsPage)
	m.HandleFunc("GET /schedules", s.schedulesPage)
	m.HandleFunc("POST /schedules/{name}/{verb}", s.scheduleVerb)
	m.HandleFunc("GET /agents/{session}", s.agentPage)
	m.HandleFunc("GET /system", s.systemPage)
	m.HandleFunc("GET /submit", s.submitPage)
	m.HandleFunc("POST /submit", s.submit)
	s.mux = m
	// Outermost first: headers on every answer, then the Host check,
	// the login, and cross-origin refusal of unsafe methods (the CSRF
	// token in each form is checked by its handler).
	cop := http.NewCrossOriginProtection()
	s.handler = s.headers(s.hosts(s.auth(cop.Handler(m))))
}

// headers sets the security headers of every answer: scripts and styles
// only from the view itself, no framing, no sniffing.
func (s *Server) headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
			"connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// hosts refuses, on a view without a token, requests addressed to a name
// that is not loopback (see Config.AnyHost).
func (s *Server) hosts(next http.Handler) http.Handler {
	if s.cfg.Token != "" || s.cfg.AnyHost {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if !loopbackHost(host) {
			http.Error(w, fmt.Sprintf("web: Host %q is not a loopback name: this view answers only requests to localhost, 127.0.0.1 or [::1]", r.Host),
				http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a Host name stands for this machine only.
func loopbackHost(host string) bool {
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// The login's cookie.
const cookieName = "planbus_session"

// sessionValue is what the cookie holds for a token: a digest, so the
// token itself is not sent again with every request.
func sessionValue(token string) string {
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte("planbus web session"))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// auth asks for the token on every route but the login and the static
// files. A valid ?token= in an address logs in and is taken out of the
// address (a redirect), so it stays out of the history and of shared
// links.
func (s *Server) auth(next http.Handler) http.Handler {
	if s.cfg.Token == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/login" || strings.HasPrefix(r.URL.Path, "/static/") {
			next.ServeHTTP(w, r)
			return
		}
		if tok := r.URL.Query().Get("token"); tok != "" && r.Method == http.MethodGet {
			if !s.validToken(tok) {
				s.loginForm(w, r, "That token is not this view's.", http.StatusUnauthorized)
				return
			}
			s.setCookie(w, r)
			q := r.URL.Query()
			q.Del("token")
			u := *r.URL
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		if s.authorized(r) {
			next.ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodGet && r.Header.Get("Accept") != "text/event-stream" {
			http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		http.Error(w, "web: log in first (the view's token)", http.StatusUnauthorized)
	})
}

func (s *Server) validToken(tok string) bool {
	return hmac.Equal([]byte(sessionValue(tok)), []byte(s.session))
}

// authorized reports whether r carries the login: the cookie or the
// token as a bearer.
func (s *Server) authorized(r *http.Request) bool {
	if c, err := r.Cookie(cookieName); err == nil && hmac.Equal([]byte(c.Value), []byte(s.session)) {
		return true
	}
	if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return s.validToken(strings.TrimSpace(b))
	}
	return false
}

func (s *Server) setCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: s.session, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}

// csrf is the token the view's forms carry: a MAC of the visitor's
// session under a secret of this process. A page of another origin can
// neither read it nor make it.
func (s *Server) csrf(r *http.Request) string {
	sess := ""
	if c, err := r.Cookie(cookieName); err == nil {
		sess = c.Value
	}
	mac := hmac.New(sha256.New, s.secret)
	mac.Write([]byte("csrf\x00" + sess))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// checkCSRF reports whether a form posted to the view carries its token;
// if not, it answers 403.
func (s *Server) checkCSRF(w http.ResponseWriter, r *http.Request) bool {
	if hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(s.csrf(r))) {
		return true
	}
	s.errorPage(w, r, http.StatusForbidden, "This form is stale or did not come from this view (its CSRF token is missing or wrong): reload the page and send it again.")
	return false
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Token == "" || s.authorized(r) {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	s.loginForm(w, r, "", http.StatusOK)
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if s.cfg.Token == "" {
		http.Redirect(w, r, "/requests", http.StatusSeeOther)
		return
	}
	if !s.validToken(strings.TrimSpace(r.PostFormValue("token"))) {
		s.loginForm(w, r, "That token is not this view's.", http.StatusUnauthorized)
		return
	}
	s.setCookie(w, r)
	http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
}

// safeNext is where to go after the login: a path of this view, never
// another site.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/requests"
	}
	return next
}

func (s *Server) loginForm(w http.ResponseWriter, r *http.Request, problem string, code int) {
	next := r.URL.Query().Get("next")
	if r.Method == http.MethodPost {
		next = r.PostFormValue("next")
	}
	s.render(w, r, code, "login", map[string]any{"Problem": problem, "Next": safeNext(next)})
}
