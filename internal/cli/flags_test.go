package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/planbus/planbus/internal/bus/bustest"
)

func TestSizeFlag(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"256MiB", 256 << 20, true},
		{"256 MiB", 256 << 20, true},
		{"1GiB", 1 << 30, true},
		{"64MB", 64_000_000, true},
		{"1048576", 1 << 20, true},
		{"1.5GiB", 3 << 29, true},
		{"", 0, false},
		{"-1", 0, false},
		{"lots", 0, false},
		{"2PiB", 0, false},
		{"99999999999999999999GiB", 0, false},
	} {
		var v sizeValue
		err := v.Set(tt.in)
		if (err == nil) != tt.ok || (tt.ok && int64(v) != tt.want) {
			t.Errorf("Set(%q) = %d, %v; want %d, ok %v", tt.in, v, err, tt.want, tt.ok)
		}
	}
}

// FuzzSizeFlag: any text is either a size within bounds or an error
// naming it, never a panic or a negative size.
func FuzzSizeFlag(f *testing.F) {
	for _, s := range []string{"256MiB", "1 GiB", "64MB", "0", "1e3", "-5", "9999999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var v sizeValue
		if err := v.Set(s); err == nil && (v < 0 || v > maxSize) {
			t.Errorf("Set(%q) = %d, out of bounds", s, v)
		}
	})
}

// Log lines carry the time to the millisecond at least, so a log orders
// what happened within a second.
func TestLogTimestampsHaveSubseconds(t *testing.T) {
	var c Common
	c.LogLevel, c.LogFormat = "info", "json"
	var buf bustest.SyncBuffer
	log, err := c.Logger(&buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Info().Msg("one")
	var line struct {
		Time string `json:"time"`
	}
	if err := json.Unmarshal([]byte(buf.String()), &line); err != nil {
		t.Fatalf("log line %q: %v", buf.String(), err)
	}
	ts, err := time.Parse(time.RFC3339Nano, line.Time)
	if err != nil || !strings.Contains(line.Time, ".") {
		t.Fatalf("time %q (%v), want RFC 3339 with a fraction of a second", line.Time, err)
	}
	if d := time.Since(ts); d < 0 || d > time.Minute {
		t.Errorf("time %s is %s from now", ts, d)
	}
}
