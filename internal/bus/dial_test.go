package bus_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bus"
)

// Dial's error says why it gave up: a config it cannot use, the caller's
// ctx ending while it waited, or the server not answering within
// Config.ConnectTimeout.
func TestDialSaysWhyItGaveUp(t *testing.T) {
	// Port 1 on loopback: nothing listens there, so every try fails and
	// Dial waits.
	const nowhere = "nats://127.0.0.1:1"
	tests := []struct {
		name    string
		cfg     bus.Config
		ctxWait time.Duration // 0: a context that does not end
		is      error
		says    string
	}{
		{"no URL", bus.Config{}, 0, bus.ErrInvalidConfig, "URL: empty"},
		{"ctx ends while waiting", bus.Config{URL: nowhere}, 300 * time.Millisecond, context.DeadlineExceeded, "stopped while waiting for the server"},
		{"connect timeout", bus.Config{URL: nowhere, ConnectTimeout: 300 * time.Millisecond}, 0, bus.ErrUnreachable, "did not answer within 300ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.ctxWait > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.ctxWait)
				defer cancel()
			}
			c, err := bus.Dial(ctx, tt.cfg, zerolog.Nop())
			if err == nil {
				c.Close()
				t.Fatal("got a connection, want an error")
			}
			if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("got %v, want an error that is %v and says %q", err, tt.is, tt.says)
			}
		})
	}
}
