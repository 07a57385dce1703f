package plannercmd

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/metrics"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/web"
	"github.com/rs/zerolog"
)

// DefaultHTTP is where planner serve and planner ui serve the web view:
// loopback, on a port that is neither NATS's (4222, 6222, 7422) nor its
// monitoring's (8222).
const DefaultHTTP = "127.0.0.1:4280"

// viewFlags are the web view's flags.
type viewFlags struct {
	addr      string
	tokenFile string
	// given: --http was given (or $PLANBUS_HTTP), not left at its default.
	given bool
	// metrics is the process's registry, served on /metrics beside the
	// view; nil serves the Go and process metrics of a registry of its
	// own.
	metrics *metrics.Registry
}

func (v *viewFlags) register(f *cli.Flags, def string) {
	usage := `address of the web view (and of the process's other HTTP endpoints); "" turns it off`
	if def == "" {
		usage = `serve the web view on this address while the command runs (e.g. 127.0.0.1:4280)`
	}
	f.String(&v.addr, "http", "PLANBUS_HTTP", def, usage)
	f.String(&v.tokenFile, "http-token-file", "PLANBUS_HTTP_TOKEN_FILE", "",
		"with a login: the file holding the web view's token, made with a random one if missing (planner serve: <data-dir>/auth/web.token)")
}

// check is the view's protected mode, after the flags are parsed: an
// address beyond loopback needs a login (login) or --insecure.
func (v *viewFlags) check(f *cli.Flags, cmd string, login, insecure bool) error {
	f.Visit(func(fl *flag.Flag) {
		if fl.Name == "http" {
			v.given = true
		}
	})
	if f.Env("PLANBUS_HTTP") != "" {
		v.given = true
	}
	if v.addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(v.addr)
	if err != nil {
		return fmt.Errorf("%s: --http %q: want host:port, like %s", cmd, v.addr, DefaultHTTP)
	}
	if !cli.Loopback(host) && !login && !insecure {
		return fmt.Errorf("%s: --http %s: %w: anyone who can reach it could watch and cancel every request. "+
			"Turn on --auth (the view then asks for a token), or pass --insecure to serve it without one anyway", cmd, v.addr, cli.ErrExposed)
	}
	return nil
}

// view is a web view being served.
type view struct {
	URL string
	// TokenFile holds the login token, if one is asked and it is kept in
	// a file; Token is the token.
	TokenFile string
	Token     string
	srv       *http.Server
	web       *web.Server
	conn      *bus.Conn // the view's own connection, if it has one
}

// Stop ends the view: open streams first, then the server.
func (v *view) Stop() {
	if v == nil {
		return
	}
	v.web.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if v.srv.Shutdown(ctx) != nil {
		_ = v.srv.Close()
	}
	if v.conn != nil {
		v.conn.Close()
	}
}

// LoginURL is the address to open: with a token not kept in a file, the
// link that logs in.
func (v *view) LoginURL() string {
	if v.Token != "" && v.TokenFile == "" {
		return v.URL + "/?token=" + v.Token
	}
	return v.URL + "/"
}

// errNoView: the default address was taken; the command goes on without
// the view.
var errNoView = errors.New("the web view's default address is taken")

// start serves the view of the system nc is connected to on --http; nil
// when --http is "". login asks for a token, kept in --http-token-file,
// else in tokenFile when it is not empty, else made for this run.
// A default address that is taken is errNoView (the caller goes on
// without the view); an address that was asked for and cannot be had is
// an error.
func (v *viewFlags) start(nc *nats.Conn, login bool, tokenFile string, log zerolog.Logger) (*view, error) {
	if v.addr == "" {
		return nil, nil
	}
	cfg := web.Config{Version: cli.Version()}
	out := &view{}
	if login {
		if v.tokenFile != "" {
			tokenFile = v.tokenFile
		}
		tok, err := viewToken(tokenFile)
		if err != nil {
			return nil, err
		}
		cfg.Token, out.Token, out.TokenFile = tok, tok, tokenFile
	}
	host, _, _ := net.SplitHostPort(v.addr)
	cfg.AnyHost = !cli.Loopback(host)
	ln, err := net.Listen("tcp", v.addr)
	if err != nil {
		if !v.given {
			return nil, fmt.Errorf("%w: %v", errNoView, err)
		}
		return nil, fmt.Errorf("--http %s: %w", v.addr, err)
	}
	w, err := web.New(nc, cfg, log)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	out.web = w
	reg := v.metrics
	if reg == nil {
		reg = metrics.New()
	}
	out.srv = &http.Server{Handler: httpHandler(w, cli.MetricsGuard(reg.Handler(), cfg.Token, cfg.AnyHost)), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: cli.HTTPErrorLog(log)}
	out.URL = "http://" + ln.Addr().String()
	go func() { _ = out.srv.Serve(ln) }()
	return out, nil
}

// httpHandler is everything a planbus process serves over HTTP: the web
// view, and beside it the process's Prometheus metrics on /metrics,
// outside the view's login (cli.MetricsGuard has their rules).
func httpHandler(view, metricsHandler http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", view)
	mux.Handle(cli.MetricsPath, metricsHandler)
	return mux
}

// viewToken reads the login token from file, making the file with a
// random token if it is missing; with no file, it makes a token for this
// run.
func viewToken(file string) (string, error) {
	if file == "" {
		return newToken()
	}
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		var made bool
		if b, made, err = makeToken(file); made || err != nil {
			return strings.TrimSpace(string(b)), err
		}
	}
	if err != nil {
		return "", fmt.Errorf("--http-token-file %s: %w", file, err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 16 || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("--http-token-file %s: want one token of at least 16 characters, without spaces", file)
	}
	return tok, nil
}

// makeToken writes a new random token to file (0600, its directory 0700)
// and returns it; if another process made the file first (O_EXCL), it
// reads that one instead, and made is false.
func makeToken(file string) (b []byte, made bool, err error) {
	tok, err := newToken()
	if err != nil {
		return nil, false, err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return nil, false, fmt.Errorf("--http-token-file: %w", err)
	}
	fh, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		b, err = os.ReadFile(file)
		return b, false, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("--http-token-file %s: %w", file, err)
	}
	_, err = fh.WriteString(tok + "\n")
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, false, fmt.Errorf("--http-token-file %s: %w", file, err)
	}
	return []byte(tok), true, nil
}

func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// serveTokenFile is where planner serve --auth keeps the view's token.
func serveTokenFile(dataDir string) string { return filepath.Join(dataDir, "auth", "web.token") }

// announce tells where the view is, in the log at info (serve, ui) and,
// for a command whose log shows only trouble (run), on w.
func (v *view) announce(log zerolog.Logger, w func(string)) {
	if v == nil {
		return
	}
	msg := "web view on " + v.LoginURL()
	if v.TokenFile != "" {
		msg += " (log in with the token in " + v.TokenFile + ")"
	}
	msg += " (metrics on " + v.URL + cli.MetricsPath + ")"
	if w != nil {
		w(msg)
		return
	}
	log.Info().Str("url", v.URL).Msg(msg)
}

// startView serves the view for a command, telling where; a default
// address that is taken is logged, and the command goes on without it.
func (v *viewFlags) startView(nc *nats.Conn, login bool, tokenFile string, log zerolog.Logger, w func(string)) (*view, error) {
	out, err := v.start(nc, login, tokenFile, log)
	if errors.Is(err, errNoView) {
		log.Warn().Err(err).Msg(`no web view: pass --http to choose another address, or --http "" to turn it off`)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out.announce(log, w)
	return out, nil
}

// runView serves the view during planner run, if --http asks for it;
// with --auth it asks for a token made for the run, printed with the
// address.
func (v *viewFlags) runView(conn *bus.Conn, login bool, log zerolog.Logger, io cli.IO) (*view, error) {
	return v.startView(conn.NC, login, "", log, func(msg string) { fmt.Fprintln(io.Stderr, "planner run: "+msg) })
}

// serveView serves the view of planner serve's node, as a client of it;
// with authorization on it asks for the token kept in the data
// directory. A nil view with ExitOK: no view, and the node goes on.
func serveView(ctx context.Context, n *node.Node, v *viewFlags, dataDir string, log zerolog.Logger) (*view, int) {
	if v.addr == "" {
		return nil, cli.ExitOK
	}
	conn, err := n.DialAs(ctx, bus.RoleClient, log)
	if err != nil {
		log.Error().Err(err).Msg("web view: cannot connect")
		return nil, cli.CtxExit(ctx, cli.ExitFailed)
	}
	out, err := v.startView(conn.NC, n.Seeds != nil, serveTokenFile(dataDir), log, nil)
	if err != nil || out == nil {
		conn.Close()
		if err != nil {
			log.Error().Err(err).Msg("web view: cannot serve")
			return nil, cli.ExitUsage
		}
		return nil, cli.ExitOK
	}
	out.conn = conn
	return out, cli.ExitOK
}
