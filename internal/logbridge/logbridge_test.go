package logbridge_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/logbridge"
)

// stamp stamps lines as the commands' logger does (internal/cli's
// timestamp hook).
type stamp struct{}

func (stamp) Run(e *zerolog.Event, _ zerolog.Level, _ string) {
	e.Str(zerolog.TimestampFieldName, "stamped")
}

// A line logged through slog is the line zerolog writes for the same
// event: the same keys and values, in the same order, and one time.
func TestSlogWritesZerologsLines(t *testing.T) {
	tests := []struct {
		name string
		log  func(*bytes.Buffer) zerolog.Logger
	}{
		{"timestamp hook", func(b *bytes.Buffer) zerolog.Logger { return zerolog.New(b).Hook(stamp{}) }},
		{"no timestamp", func(b *bytes.Buffer) zerolog.Logger { return zerolog.New(b) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want, got bytes.Buffer
			zlog := tt.log(&want).With().Str("component", "toolworker").Logger()
			zlog.Warn().Err(errors.New("boom")).
				Dur("ack_wait", 1500*time.Millisecond).Strs("skills", []string{"echo"}).Uint64("deliveries", 2).Msg("fetch failed")
			logbridge.Slog(tt.log(&got)).With("component", "toolworker").Warn("fetch failed", slog.Any("error", errors.New("boom")),
				slog.Duration("ack_wait", 1500*time.Millisecond), slog.Any("skills", []string{"echo"}), slog.Uint64("deliveries", 2))
			if diff := cmp.Diff(want.String(), got.String()); diff != "" {
				t.Errorf("line (-zerolog's +through slog):\n%s", diff)
			}
			if n := strings.Count(got.String(), `"time"`); n > 1 {
				t.Errorf("%d time keys in %s", n, got.String())
			}
		})
	}
}

// The logger's level holds for slog's levels, and Enabled says so cheaply.
func TestSlogKeepsTheLevel(t *testing.T) {
	var buf bytes.Buffer
	log := logbridge.Slog(zerolog.New(&buf).Level(zerolog.InfoLevel))
	if log.Enabled(t.Context(), slog.LevelDebug) || !log.Enabled(t.Context(), slog.LevelInfo) {
		t.Error("at info level: debug enabled or info not")
	}
	log.Debug("hidden")
	log.Error("shown")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("log %q: %v", buf.String(), err)
	}
	if diff := cmp.Diff(map[string]any{"level": "error", "message": "shown"}, line); diff != "" {
		t.Errorf("log line (-want +got):\n%s", diff)
	}
}
