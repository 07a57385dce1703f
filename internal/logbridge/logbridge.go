// Package logbridge hands planbus's zerolog loggers to the packages whose
// API takes a *slog.Logger (worker, client): planbus's commands keep
// zerolog's output format, and the lines of those packages come out in it
// with their fields.
package logbridge

import (
	"context"
	"log/slog"
	"time"

	"github.com/rs/zerolog"
)

// Slog returns a *slog.Logger that writes through log, at log's level and
// with its fields, through zerolog's own slog.Handler. log stamps the lines'
// time itself, or leaves it out, as it does for its own lines: slog's
// record time is dropped, since the handler would add it beside the one
// of log's timestamp hook (the commands' nanosecond one) and a line would
// have two "time" keys.
func Slog(log zerolog.Logger) *slog.Logger {
	return slog.New(untimed{zerolog.NewSlogHandler(log)})
}

// untimed is a slog.Handler that hands records on without their time.
type untimed struct{ slog.Handler }

func (h untimed) Handle(ctx context.Context, r slog.Record) error {
	r.Time = time.Time{}
	return h.Handler.Handle(ctx, r)
}

func (h untimed) WithAttrs(attrs []slog.Attr) slog.Handler {
	return untimed{h.Handler.WithAttrs(attrs)}
}

func (h untimed) WithGroup(name string) slog.Handler {
	return untimed{h.Handler.WithGroup(name)}
}
