package wire

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/planbus/planbus"
)

// The messages a tool call makes on its way (the call, its result and the
// progress events around it) are written here, byte for byte as
// encoding/json.Marshal writes them, without reflection: for a no-op tool
// encoding them took more CPU than deciding what to send. A property test
// holds every field of each type to encoding/json's output, so a field
// added to a type and not here fails it.

// AppendCall appends c as json.Marshal writes it.
func AppendCall(b []byte, c *planbus.ToolCall) ([]byte, error) {
	var err error
	b = appendAttempt(b, c.PlanID, c.RequestID, c.ToolID, c.Skill, c.Attempt)
	b = appendKey(b, ',', "maxAttempts")
	b = strconv.AppendInt(b, int64(c.MaxAttempts), 10)
	b = appendKey(b, ',', "input")
	if b, err = appendRaw(b, c.Input); err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	b = appendKey(b, ',', "timeoutMs")
	b = strconv.AppendInt(b, c.TimeoutMs, 10)
	b = appendKey(b, ',', "idempotencyKey")
	b = AppendString(b, c.IdempotencyKey)
	if !c.ReleasedAt.IsZero() {
		b = appendKey(b, ',', "releasedAt")
		if b, err = appendTime(b, c.ReleasedAt); err != nil {
			return nil, err
		}
	}
	b = appendKey(b, ',', "token")
	b = AppendString(b, c.Token)
	b = appendKey(b, ',', "cancelDigest")
	b = AppendString(b, c.CancelDigest)
	return append(b, '}'), nil
}

// AppendResult appends r as json.Marshal writes it.
func AppendResult(b []byte, r *planbus.ToolResult) ([]byte, error) {
	var err error
	b = appendAttempt(b, r.PlanID, r.RequestID, r.ToolID, r.Skill, r.Attempt)
	b = appendKey(b, ',', "state")
	b = AppendString(b, string(r.State))
	if len(r.Output) > 0 {
		b = appendKey(b, ',', "output")
		if b, err = appendRaw(b, r.Output); err != nil {
			return nil, fmt.Errorf("output: %w", err)
		}
	}
	if r.Error != nil {
		b = appendKey(b, ',', "error")
		b = appendError(b, r.Error)
	}
	if len(r.StatePatch) > 0 {
		b = appendKey(b, ',', "statePatch")
		if b, err = appendRaw(b, r.StatePatch); err != nil {
			return nil, fmt.Errorf("statePatch: %w", err)
		}
	}
	b = appendOptString(b, "workerId", r.WorkerID)
	if !r.StartedAt.IsZero() {
		b = appendKey(b, ',', "startedAt")
		if b, err = appendTime(b, r.StartedAt); err != nil {
			return nil, err
		}
	}
	if !r.FinishedAt.IsZero() {
		b = appendKey(b, ',', "finishedAt")
		if b, err = appendTime(b, r.FinishedAt); err != nil {
			return nil, err
		}
	}
	if r.DurationMs != 0 {
		b = appendKey(b, ',', "durationMs")
		if b, err = AppendFloat(b, r.DurationMs); err != nil {
			return nil, err
		}
	}
	b = appendOptString(b, "token", r.Token)
	return append(b, '}'), nil
}

// AppendEvent appends e as json.Marshal writes it.
func AppendEvent(b []byte, e *planbus.Event) ([]byte, error) {
	var err error
	b = appendKey(b, '{', "type")
	b = AppendString(b, string(e.Type))
	b = appendKey(b, ',', "time")
	if b, err = appendTime(b, e.Time); err != nil {
		return nil, err
	}
	b = appendKey(b, ',', "requestId")
	b = AppendString(b, e.RequestID)
	b = appendOptString(b, "planId", e.PlanID)
	b = appendOptString(b, "toolId", e.ToolID)
	b = appendOptString(b, "skill", e.Skill)
	b = appendOptInt(b, "attempt", int64(e.Attempt))
	b = appendOptString(b, "message", e.Message)
	if e.Error != nil {
		b = appendKey(b, ',', "error")
		b = appendError(b, e.Error)
	}
	b = appendOptInt(b, "delayMs", e.DelayMs)
	b = appendOptString(b, "workerId", e.WorkerID)
	if e.DurationMs != 0 {
		b = appendKey(b, ',', "durationMs")
		if b, err = AppendFloat(b, e.DurationMs); err != nil {
			return nil, err
		}
	}
	b = appendOptString(b, "sessionId", e.SessionID)
	b = appendOptString(b, "from", e.From)
	b = appendOptString(b, "to", e.To)
	b = appendOptInt(b, "attempts", int64(e.Attempts))
	b = appendOptInt(b, "tools", int64(e.Tools))
	b = appendOptString(b, "goal", e.Goal)
	b = appendOptString(b, "template", e.Template)
	b = appendOptInt(b, "step", int64(e.Step))
	return append(b, '}'), nil
}

// appendAttempt opens a call's or a result's object with the fields both
// begin with, which name the attempt.
func appendAttempt(b []byte, planID, requestID, toolID, skill string, attempt int) []byte {
	b = appendKey(b, '{', "planId")
	b = AppendString(b, planID)
	b = appendKey(b, ',', "requestId")
	b = AppendString(b, requestID)
	b = appendKey(b, ',', "toolId")
	b = AppendString(b, toolID)
	b = appendKey(b, ',', "skill")
	b = AppendString(b, skill)
	b = appendKey(b, ',', "attempt")
	return strconv.AppendInt(b, int64(attempt), 10)
}

func appendError(b []byte, e *planbus.ErrorInfo) []byte {
	b = appendKey(b, '{', "code")
	b = AppendString(b, string(e.Code))
	b = appendKey(b, ',', "message")
	b = AppendString(b, e.Message)
	b = appendKey(b, ',', "category")
	b = AppendString(b, string(e.Category))
	return append(b, '}')
}

// appendKey appends sep and "key": (keys here need no escaping).
func appendKey(b []byte, sep byte, key string) []byte {
	b = append(b, sep, '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

func appendOptString(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return AppendString(appendKey(b, ',', key), s)
}

func appendOptInt(b []byte, key string, n int64) []byte {
	if n == 0 {
		return b
	}
	return strconv.AppendInt(appendKey(b, ',', key), n, 10)
}

// appendTime writes t as time.Time.MarshalJSON does (RFC 3339 with
// nanoseconds, an error for a year it cannot write).
func appendTime(b []byte, t time.Time) ([]byte, error) {
	b = append(b, '"')
	b, err := t.AppendText(b)
	if err != nil {
		return nil, fmt.Errorf("json: error calling MarshalJSON for type time.Time: %w", err)
	}
	return append(b, '"'), nil
}

// AppendFloat writes f as encoding/json writes a float64: like %g, but
// with exponents only below 1e-6 and from 1e21, unpadded. NaN and the
// infinities are an error, as there.
func AppendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("json: unsupported value: %s", strconv.FormatFloat(f, 'g', -1, 64))
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// Clean up e-09 to e-9.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

// appendRaw writes raw JSON as encoding/json writes a json.RawMessage:
// null when empty, else compacted with <, >, & and U+2028/U+2029
// escaped, an error if it is not JSON. Raw JSON with none of those to
// change (what skills and the dispatcher write) is copied as it is, once
// checked.
func appendRaw(b []byte, raw json.RawMessage) ([]byte, error) {
	if raw == nil {
		return append(b, "null"...), nil
	}
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r', '<', '>', '&', 0xE2: // 0xE2 begins U+2028 and U+2029
			enc, err := json.Marshal(raw)
			if err != nil {
				return nil, err
			}
			return append(b, enc...), nil
		}
	}
	if !json.Valid(raw) {
		_, err := json.Marshal(raw) // for encoding/json's own error
		return nil, err
	}
	return append(b, raw...), nil
}

const hex = "0123456789abcdef"

// AppendString writes s as encoding/json writes a string, HTML escaping
// on: <, > and & as \u003c, \u003e and \u0026, invalid UTF-8 as \ufffd,
// U+2028 and U+2029 escaped.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
