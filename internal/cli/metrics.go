package cli

import (
	"context"
	"crypto/subtle"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/metrics"
)

// MetricsPath is where every planbus process serves its Prometheus
// metrics: beside the web view (planner serve, run --http, ui) and on
// --metrics.
const MetricsPath = "/metrics"

// healthPath is where a --metrics listener answers health probes.
const healthPath = "/healthz"

// healthHandler answers 200 "ok" while the process is connected to NATS,
// else 503 saying why (starting, or between a lost server and the next):
// an orchestrator's liveness or readiness probe.
func healthHandler(reg *metrics.Registry) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if err := reg.Healthy(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
}

// MetricsFlags is --metrics: a listener of its own for /metrics, for the
// processes without a web view (dispatcher, toolworker, planner serve
// --nats-url) and any that wants metrics apart from its view.
type MetricsFlags struct {
	addr string
}

// Register adds --metrics to f.
func (m *MetricsFlags) Register(f *Flags) {
	f.String(&m.addr, "metrics", "PLANBUS_METRICS", "",
		"serve Prometheus metrics on http://ADDR/metrics, e.g. 127.0.0.1:9464 (default: off); on loopback it answers requests to loopback names only")
}

// Check validates --metrics after parsing.
func (m *MetricsFlags) Check(cmd string) error {
	if m.addr == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(m.addr); err != nil {
		return fmt.Errorf("%s: --metrics %q: want host:port, like 127.0.0.1:9464", cmd, m.addr)
	}
	return nil
}

// MetricsServer is a --metrics listener being served.
type MetricsServer struct {
	URL string
	srv *http.Server
}

// Start serves reg on --metrics, if it is set, and logs where at info; a
// nil server when it is off. An address that cannot be had is an error.
func (m *MetricsFlags) Start(reg *metrics.Registry, log zerolog.Logger) (*MetricsServer, error) {
	if m.addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", m.addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: %w", m.addr, err)
	}
	host, _, _ := net.SplitHostPort(m.addr)
	mux := http.NewServeMux()
	mux.Handle(MetricsPath, MetricsGuard(reg.Handler(), "", !Loopback(host)))
	mux.Handle(healthPath, MetricsGuard(healthHandler(reg), "", !Loopback(host)))
	out := &MetricsServer{URL: "http://" + ln.Addr().String() + MetricsPath,
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
			ErrorLog: HTTPErrorLog(log)}}
	go func() { _ = out.srv.Serve(ln) }()
	log.Info().Str("url", out.URL).Msg("metrics on " + out.URL)
	return out, nil
}

// Stop ends the listener.
func (s *MetricsServer) Stop() {
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s.srv.Shutdown(ctx) != nil {
		_ = s.srv.Close()
	}
}

// MetricsGuard applies the web view's rules to /metrics. Metrics hold no
// secret (counts and durations by skill, state and kind), so on loopback
// they need no login, even with --auth, and Prometheus on the same
// machine scrapes them as they are; but a loopback listener answers only
// requests addressed to a loopback name, which keeps a web page from
// reading them by DNS rebinding. Beyond loopback (anyHost), a view with a
// login (token) asks for its token as a bearer (Prometheus:
// authorization.credentials_file); a --metrics listener, which has no
// login, answers any host: put it where only Prometheus reaches.
func MetricsGuard(h http.Handler, token string, anyHost bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !anyHost {
			host := r.Host
			if hh, _, err := net.SplitHostPort(host); err == nil {
				host = hh
			}
			if !Loopback(host) {
				http.Error(w, fmt.Sprintf("metrics: Host %q is not a loopback name: these metrics answer only requests to localhost, 127.0.0.1 or [::1]", r.Host),
					http.StatusMisdirectedRequest)
				return
			}
		} else if token != "" {
			b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(b)), []byte(token)) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="planbus metrics"`)
				http.Error(w, "metrics: send the web view's token as a bearer token (Authorization: Bearer <token>)", http.StatusUnauthorized)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// HTTPErrorLog makes the HTTP server's own error log (TLS handshakes,
// broken connections) lines of the process's log, at debug: the
// ErrorLog of every planbus process's http.Server.
func HTTPErrorLog(log zerolog.Logger) *stdlog.Logger {
	return stdlog.New(zerologWriter{log}, "", 0)
}

// zerologWriter makes the HTTP server's own error log (TLS handshakes,
// broken connections) lines of the process's log.
type zerologWriter struct{ log zerolog.Logger }

func (z zerologWriter) Write(p []byte) (int, error) {
	z.log.Debug().Str("component", "http").Msg(strings.TrimSpace(string(p)))
	return len(p), nil
}
