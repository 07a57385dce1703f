package bus

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/rs/zerolog"
)

// ErrUnreachable means Dial gave up after Config.ConnectTimeout.
var ErrUnreachable = errors.New("bus: NATS unreachable")

// Conn is one component's connection to NATS and JetStream.
type Conn struct {
	NC     *nats.Conn
	JS     jetstream.JetStream
	Config Config
	log    zerolog.Logger
}

// inboxOf is the inbox prefix of a connection of cfg.
func inboxOf(cfg Config) string {
	if cfg.Client != "" {
		return ClientInbox(cfg.Client)
	}
	return cfg.Role.InboxPrefix()
}

// connName is a connection's name, as the server's monitoring (connz)
// shows it: the one given, else planbus and the role (planbus-dispatcher).
func connName(given string, role Role) string {
	switch {
	case given != "":
		return given
	case role != "":
		return "planbus-" + string(role)
	}
	return "planbus"
}

// Dial connects to cfg.URL, retrying with backoff until the server answers
// or ctx ends, so components may start before their server.
//
// The system-wide settings left unset in cfg stay unset in the Conn's
// Config until Declare takes them from the running system (see
// Config.Replicas); Config.Defaults gives them meanwhile.
func Dial(ctx context.Context, cfg Config, log zerolog.Logger) (*Conn, error) {
	if cfg.Client == "" {
		// A named client's seed says who it is: client-<name>.nk.
		cfg.Client = ClientOfSeedFile(cfg.NKeySeedFile)
	}
	given := cfg
	cfg, err := dialConfig(given)
	if err != nil {
		return nil, err
	}
	d := &dialer{cfg: cfg, log: log}
	d.lastURL.Store("")
	opts, err := d.options(connName(given.Name, cfg.Role))
	if err != nil {
		return nil, err
	}
	nc, err := d.connect(ctx, opts)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("bus: jetstream: %w", err)
	}
	return &Conn{NC: nc, JS: js, Config: cfg, log: log}, nil
}

// dialConfig is the Config a Conn of given keeps: given with its
// defaults, except the system-wide settings (replicas, retention,
// partitions, events kept, duplicate window), left as given until Declare
// takes them from the running system. It returns an ErrInvalidConfig
// error, naming the field, for an empty URL or a setting out of bounds.
func dialConfig(given Config) (Config, error) {
	cfg := given.Defaults()
	cfg.Replicas, cfg.Retention, cfg.Partitions, cfg.KeepEvents = given.Replicas, given.Retention, given.Partitions, given.KeepEvents
	cfg.DuplicateWindow = given.DuplicateWindow
	if cfg.URL == "" {
		return cfg, fmt.Errorf("%w: URL: empty (start an embedded server first)", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// dialer is one Dial under way: the connection's settings, and what its
// tries and the connection's handlers share.
type dialer struct {
	cfg Config
	log zerolog.Logger
	// lastURL is the server connected to last: the connection no longer
	// names it once it is lost. nats.go's handlers read and write it on
	// goroutines of their own.
	lastURL atomic.Value
	lastErr error     // the last try's, for the error when Dial gives up
	said    time.Time // when waiting was last said above debug
}

// options are the connection's nats.go options: its name and inbox
// prefix, reconnecting for ever, the handlers that log its losses, and
// how it reaches and authenticates to the server (in-process, a
// credentials file, an nkey seed, a CA). A seed that cannot be read is
// an error.
func (d *dialer) options(name string) ([]nats.Option, error) {
	cfg := d.cfg
	opts := []nats.Option{
		nats.Name(name),
		nats.CustomInboxPrefix(inboxOf(cfg)),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.PingInterval(5 * time.Second), // a server cut off without a TCP reset is left in ~10 s, not ~4 min
	}
	opts = append(opts, d.handlers()...)
	if cfg.InProcess != nil {
		opts = append(opts, nats.InProcessServer(cfg.InProcess))
	}
	if cfg.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.NKeySeedFile != "" {
		o, err := nats.NkeyOptionFromSeed(cfg.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("bus: nkey seed %s: %w", cfg.NKeySeedFile, err)
		}
		opts = append(opts, o)
	}
	if cfg.TLSCAFile != "" {
		opts = append(opts, nats.RootCAs(cfg.TLSCAFile))
	}
	return opts, nil
}

// handlers log what happens to the connection once made: a loss (naming
// the server left), a reconnection, an asynchronous error (naming the
// subscription's subject).
func (d *dialer) handlers() []nats.Option {
	log := d.log
	return []nats.Option{
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err != nil {
				// The server left is the one connected last: the
				// connection no longer names it once it is down.
				log.Warn().Err(err).Str("server", d.lastURL.Load().(string)).Msg("disconnected from NATS")
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			d.lastURL.Store(nc.ConnectedUrlRedacted())
			log.Info().Str("url", nc.ConnectedUrlRedacted()).Msg("reconnected to NATS")
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			ev := log.Warn().Err(err)
			if sub != nil {
				ev = ev.Str("subject", sub.Subject)
			}
			ev.Msg("NATS async error")
		}),
	}
}

// connect tries to connect with backoff (100 ms growing to 2 s between
// tries) until a try succeeds or is refused, ctx ends, or
// Config.ConnectTimeout (when set) passes; then it returns what gaveUp
// makes of it.
func (d *dialer) connect(ctx context.Context, opts []nats.Option) (*nats.Conn, error) {
	var nc *nats.Conn
	try := func() error {
		var err error
		nc, err = d.try(opts)
		return err
	}
	dctx := ctx
	if d.cfg.ConnectTimeout > 0 {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(ctx, d.cfg.ConnectTimeout)
		defer cancel()
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 100 * time.Millisecond
	b.MaxInterval = 2 * time.Second
	b.MaxElapsedTime = 0
	if err := backoff.Retry(try, backoff.WithContext(b, dctx)); err != nil {
		return nil, d.gaveUp(ctx, dctx, err)
	}
	return nc, nil
}

// try connects once. A refused connection is a permanent error, since
// waiting will not help; any other failure is kept for gaveUp and said
// (waiting).
func (d *dialer) try(opts []nats.Option) (*nats.Conn, error) {
	nc, err := nats.Connect(d.cfg.URL, opts...)
	switch {
	case err == nil:
		d.lastURL.Store(nc.ConnectedUrlRedacted())
	case refused(err):
		// Waiting will not help: say so at once.
		return nc, backoff.Permanent(err)
	default:
		d.lastErr = err
		d.sayWaiting(err)
	}
	return nc, err
}

// sayWaiting logs that Dial waits for the server. The first failure is a
// warning, so even a command that only shows warnings says what it waits
// for; then an info line every waitNotice, and each try in between at
// debug.
func (d *dialer) sayWaiting(err error) {
	ev := d.log.Debug()
	switch now := time.Now(); {
	case d.said.IsZero():
		ev, d.said = d.log.Warn(), now
	case now.Sub(d.said) >= waitNotice:
		ev, d.said = d.log.Info(), now
	}
	ev.Err(err).Str("url", RedactURL(d.cfg.URL)).Msg("waiting for NATS")
}

// gaveUp is Dial's error when the tries stopped with err: err itself
// when the server refused or no try failed by waiting; when the waiting
// ended, ctx's error if ctx ended, else ErrUnreachable (dctx, the
// connect timeout, passed), each with the last try's error.
func (d *dialer) gaveUp(ctx, dctx context.Context, err error) error {
	where := RedactURL(d.cfg.URL)
	switch {
	case d.lastErr == nil || !errors.Is(err, dctx.Err()):
		return fmt.Errorf("bus: connect %s: %w", where, err)
	case ctx.Err() != nil:
		return fmt.Errorf("bus: connect %s: stopped while waiting for the server (last error: %v): %w",
			where, d.lastErr, ctx.Err())
	default:
		return fmt.Errorf("%w: %s did not answer within %s (last error: %v); is NATS running there?",
			ErrUnreachable, where, d.cfg.ConnectTimeout, d.lastErr)
	}
}

// waitNotice is how often Dial says above debug that it still waits.
const waitNotice = 10 * time.Second

// RedactURL hides passwords and tokens in the URLs it is given, for
// messages.
func RedactURL(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil || u.User == nil {
			continue
		}
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		} else {
			u.User = url.User("xxxxx")
		}
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}

// refused: the server answered, and will not let this client in (bad
// credentials, a certificate it cannot verify, an unreadable credentials
// file).
func refused(err error) bool {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
		errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAccountAuthExpired) ||
		errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		errors.As(err, &verify) || errors.Is(err, os.ErrNotExist) || strings.Contains(err.Error(), "can't find user JWT") ||
		strings.Contains(err.Error(), "no nkey seed found")
}

// Close drains nothing: components drain their own subscriptions first.
func (c *Conn) Close() { c.NC.Close() }

// CheckClient tells whether the server lets this connection read what a
// client reads: nil, or an error naming the refusal and the likely cause
// (a seed of another role given for a client). A subscription the server
// refuses is only reported on the connection's error stream, so a client
// given the wrong seed would otherwise wait for what it can never see.
func (c *Conn) CheckClient() error {
	subject := EventSubject("probe-"+nuid.Next(), ">")
	sub, err := c.NC.SubscribeSync(subject)
	if err != nil {
		return fmt.Errorf("bus: subscribe %s: %w", subject, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := c.NC.FlushTimeout(10 * time.Second); err != nil {
		return fmt.Errorf("bus: flush: %w", err)
	}
	if err := c.NC.LastError(); errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), subject) {
		return fmt.Errorf("the server does not let this connection read a request's events (%w); is the seed given (--nkey) the client role's, client.nk?", err)
	}
	return nil
}

// StoreLimit is the most bytes one value or message may take: the
// server's max payload, and the limit planbus declared its buckets and
// streams with (Config.MaxPayload), whichever is lower, less room for
// headers.
func (c *Conn) StoreLimit() int {
	limit := int64(c.Config.Defaults().MaxPayload)
	if m := c.NC.MaxPayload(); m > 0 && m < limit {
		limit = m
	}
	return int(limit) - 4096
}
