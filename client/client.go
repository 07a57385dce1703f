package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/telemetry"
)

// Errors. Match them with errors.Is.
var (
	// ErrNoResult: the context ended before the outcome (or the plan's
	// execution result) arrived.
	ErrNoResult = errors.New("client: no result")
	// ErrNotFound: no request or plan has the id (they are kept for a day).
	ErrNotFound = errors.New("client: not found")
	// ErrInvalidOption is matched by the errors of options New refuses.
	ErrInvalidOption = errors.New("client: invalid option")
	// ErrPlanIDTaken: ExecutePlan was given a plan whose planId names
	// another plan, submitted before (plans are kept for a day).
	ErrPlanIDTaken = errors.New("client: plan id taken")
)

// RejectedError is the planner's answer to a request it refused: what was
// wrong and where (Reply.Error.Field, a JSON pointer).
type RejectedError struct {
	Reply planbus.Rejected
}

func (e *RejectedError) Error() string { return e.Reply.Error.Message }

// Is makes errors.Is(err, ErrNotFound) hold for a NOT_FOUND rejection.
func (e *RejectedError) Is(target error) bool {
	return target == ErrNotFound && e.Reply.Error.Code == planbus.CodeNotFound
}

// Client talks to a planbus system over a NATS connection. Create it with
// New.
type Client struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	log *slog.Logger
	opt options

	mu      sync.Mutex
	streams map[string]jetstream.Stream
	buckets map[string]jetstream.KeyValue
}

// options are the Client's settings; each has an Option.
type options struct {
	log            *slog.Logger
	requestTimeout time.Duration
	pollInterval   time.Duration
	eventBuffer    int
	as             string
}

// Option changes a default of New.
type Option func(*options) error

// WithLogger gives the Client a logger (default, and with a nil log:
// none). It logs at debug level only: what it retries and what it skips.
func WithLogger(log *slog.Logger) Option {
	return func(o *options) error {
		o.log = log
		return nil
	}
}

// WithRequestTimeout sets how long the planner has to answer a call to one
// of its endpoints (a submission, a cancel, a list) before the call fails.
// Default 15 s.
func WithRequestTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("%w: request timeout %s, want more than 0", ErrInvalidOption, d)
		}
		o.requestTimeout = d
		return nil
	}
}

// WithPollInterval sets how often a wait reads the outcome's stream again,
// for an outcome published while the connection was down (a subscription
// misses those). Default 2 s.
func WithPollInterval(d time.Duration) Option {
	return func(o *options) error {
		if d < 10*time.Millisecond {
			return fmt.Errorf("%w: poll interval %s, want at least 10ms", ErrInvalidOption, d)
		}
		o.pollInterval = d
		return nil
	}
}

// WithEventBuffer sets how many events a watch holds for a slow onEvent
// before the connection drops the next ones. Default 1,000,000 (a plan
// of 10,000 tools makes about 30,000 events).
func WithEventBuffer(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("%w: event buffer %d, want at least 1", ErrInvalidOption, n)
		}
		o.eventBuffer = n
		return nil
	}
}

// As makes the Client call the planner's endpoints as the named client
// name (planner auth add-client NAME writes its seed, client-NAME.nk), on
// that client's own subjects: what it submits is its own, and other
// clients may not cancel, approve or reset it. The connection must be the
// named client's (its seed, and its inbox prefix _INBOX_client_NAME:
// nats.CustomInboxPrefix). Default: the shared client role.
func As(name string) Option {
	return func(o *options) error {
		if name == "" || len(name) > 64 || strings.ContainsAny(name, ".*> \t") {
			return fmt.Errorf("%w: client name %q: want 1 to 64 letters, digits, '_' or '-'", ErrInvalidOption, name)
		}
		o.as = name
		return nil
	}
}

// New returns a Client on nc. The connection stays the caller's: the
// Client never closes it.
func New(nc *nats.Conn, opts ...Option) (*Client, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: no NATS connection", ErrInvalidOption)
	}
	o := options{requestTimeout: 15 * time.Second, pollInterval: 2 * time.Second, eventBuffer: 1_000_000}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("client: jetstream: %w", err)
	}
	log := o.log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{nc: nc, js: js, log: log.With(slog.String("component", "client")), opt: o,
		streams: map[string]jetstream.Stream{}, buckets: map[string]jetstream.KeyValue{}}, nil
}

// NewID returns a fresh id for requests and plans.
func NewID() string { return nuid.Next() }

// stream returns a handle on a stream, looked up once.
func (c *Client) stream(ctx context.Context, name string) (jetstream.Stream, error) {
	c.mu.Lock()
	st, ok := c.streams[name]
	c.mu.Unlock()
	if ok {
		return st, nil
	}
	st, err := c.js.Stream(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("client: stream %s: %w", name, err)
	}
	c.mu.Lock()
	c.streams[name] = st
	c.mu.Unlock()
	return st, nil
}

// bucket returns a handle on a KV bucket, looked up once.
func (c *Client) bucket(ctx context.Context, name string) (jetstream.KeyValue, error) {
	c.mu.Lock()
	kv, ok := c.buckets[name]
	c.mu.Unlock()
	if ok {
		return kv, nil
	}
	kv, err := c.js.KeyValue(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("client: bucket %s: %w", name, err)
	}
	c.mu.Lock()
	c.buckets[name] = kv
	c.mu.Unlock()
	return kv, nil
}

// get reads key from bucket; a missing key is nil, nil.
func (c *Client) get(ctx context.Context, bucket, key string) ([]byte, error) {
	kv, err := c.bucket(ctx, bucket)
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", bucket, key, err)
	}
	return e.Value(), nil
}

// call sends body to a planner endpoint and decodes its answer into
// reply. A refusal is a *RejectedError.
func (c *Client) call(ctx context.Context, subject string, body []byte, reply any) error {
	rctx, cancel := context.WithTimeout(ctx, c.opt.requestTimeout)
	defer cancel()
	// ctx's span, if it has one, goes along as W3C trace context: the
	// planner's spans continue the caller's trace.
	subject = bus.ClientSubject(c.opt.as, subject)
	msg, err := c.nc.RequestMsgWithContext(rctx, &nats.Msg{Subject: subject, Data: body, Header: telemetry.Inject(ctx, nil)})
	if err != nil {
		return fmt.Errorf("client: no planner answered on %s: %w", subject, err)
	}
	if msg.Header.Get("Nats-Service-Error-Code") != "" {
		rej := &RejectedError{}
		if json.Unmarshal(msg.Data, &rej.Reply) != nil || rej.Reply.Error.Message == "" {
			rej.Reply.Status = "rejected"
			rej.Reply.Error = planbus.ReplyError{Code: planbus.CodeInvalidRequest, Message: msg.Header.Get("Nats-Service-Error")}
		}
		return rej
	}
	if err := json.Unmarshal(msg.Data, reply); err != nil {
		return fmt.Errorf("client: answer on %s: %w", subject, err)
	}
	return nil
}
