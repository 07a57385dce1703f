package wire

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/planbus/planbus"
)

// fill sets every field of the struct v points to, recursively, to a
// value drawn from pools of ordinary and awkward ones: empty and zero
// (omitted fields), escapes, HTML characters, invalid UTF-8, U+2028,
// floats on both sides of exponent notation, non-finite floats, times in
// other zones and beyond year 9999, raw JSON with spaces, HTML and errors.
func fill(rng *rand.Rand, v reflect.Value) {
	strs := []string{"", "p1", "echo", "a\"b\\c", "<b>&amp;</b>", "tab\tnl\nret\rbs\bff\f", "\x00\x01\x1f\x7f", "é漢字😀",
		"bad\xffutf8\xc3", "line\u2028para\u2029", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}
	floats := []float64{0, 1, -1, 0.5, 1000.125, 1e-6, 9.99e-7, 1e20, 1e21, 123456789012345678901234.0, -2.5e-9, math.SmallestNonzeroFloat64,
		math.MaxFloat64, math.Inf(1), math.NaN()}
	raws := []json.RawMessage{nil, {}, json.RawMessage(`{}`), json.RawMessage(`{"a":1,"b":[true,null]}`), json.RawMessage(`{ "a" : 1 }`),
		json.RawMessage(`{"h":"<b>&"}`), json.RawMessage("\"\u2028\""), json.RawMessage(`[1,2`), json.RawMessage(`17`), json.RawMessage(`"x"`)}
	zones := []*time.Location{time.UTC, time.FixedZone("x", -5*3600-30*60), time.FixedZone("y", 14*3600)}
	times := []time.Time{{}, time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC), time.Date(2026, 11, 26, 12, 0, 0, 123456789, zones[1]),
		time.Date(1999, 1, 2, 3, 4, 5, 100, zones[2]), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(0, 0)}
	switch v.Interface().(type) {
	case time.Time:
		v.Set(reflect.ValueOf(times[rng.IntN(len(times))]))
		return
	case json.RawMessage:
		v.Set(reflect.ValueOf(raws[rng.IntN(len(raws))]))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(strs[rng.IntN(len(strs))])
	case reflect.Int, reflect.Int64:
		v.SetInt([]int64{0, 1, -1, 3, 86_400_000, math.MaxInt64, math.MinInt64}[rng.IntN(7)])
	case reflect.Float64:
		v.SetFloat(floats[rng.IntN(len(floats))])
	case reflect.Pointer:
		if rng.IntN(3) == 0 {
			v.SetZero()
			return
		}
		p := reflect.New(v.Type().Elem())
		fill(rng, p.Elem())
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(rng, v.Field(i))
		}
	default:
		panic("fill: a field of kind " + v.Kind().String() + ": teach the test and the encoder about it")
	}
}

// Every call, result and event, with any values in any field, is written
// byte for byte as encoding/json writes it, and fails where it fails.
func TestAppendIsEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	check := func(t *testing.T, v any, appendJSON func([]byte) ([]byte, error)) {
		t.Helper()
		want, wantErr := json.Marshal(v)
		got, gotErr := appendJSON([]byte("prefix"))
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%+v: error %v, encoding/json's %v", v, gotErr, wantErr)
		}
		if gotErr == nil && !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Fatalf("%+v:\n got %s\nwant prefix%s", v, got, want)
		}
	}
	for range 20000 {
		var c planbus.ToolCall
		fill(rng, reflect.ValueOf(&c).Elem())
		check(t, &c, func(b []byte) ([]byte, error) { return AppendCall(b, &c) })
		var r planbus.ToolResult
		fill(rng, reflect.ValueOf(&r).Elem())
		check(t, &r, func(b []byte) ([]byte, error) { return AppendResult(b, &r) })
		var e planbus.Event
		fill(rng, reflect.ValueOf(&e).Elem())
		check(t, &e, func(b []byte) ([]byte, error) { return AppendEvent(b, &e) })
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "<&>", "\x00\xff", "\u2028", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	})
}

// BenchmarkAppend writes a call, a result and an event with the encoders
// and with json.Marshal (the baseline), alternating rounds of 200 in the
// same process, and reports the median ns of each and their ratio.
func BenchmarkAppend(b *testing.B) {
	now := time.Now()
	c := planbus.ToolCall{PlanID: "p-0123456789abcdef", RequestID: "r-0123456789abcdef", ToolID: "t-17", Skill: "echo", Attempt: 1, MaxAttempts: 3,
		Input: json.RawMessage(`{"n":17,"city":"Lisbon"}`), TimeoutMs: 30000, IdempotencyKey: "p-0123456789abcdef/t-17/1", ReleasedAt: now,
		Token: tok, CancelDigest: tok}
	r := planbus.ToolResult{PlanID: c.PlanID, RequestID: c.RequestID, ToolID: c.ToolID, Skill: c.Skill, Attempt: 1, State: "succeeded",
		Output: json.RawMessage(`{"n":17}`), WorkerID: "w-1", StartedAt: now, FinishedAt: now, DurationMs: 0.125, Token: tok}
	e := planbus.Event{Type: "tool.succeeded", Time: now, RequestID: c.RequestID, PlanID: c.PlanID, ToolID: c.ToolID, Skill: "echo",
		Attempt: 1, WorkerID: "w-1", DurationMs: 0.125}
	std := func() {
		_, _ = json.Marshal(&c)
		_, _ = json.Marshal(&r)
		_, _ = json.Marshal(&e)
	}
	var buf []byte
	mine := func() {
		buf, _ = AppendCall(buf[:0], &c)
		buf, _ = AppendResult(buf[:0], &r)
		buf, _ = AppendEvent(buf[:0], &e)
	}
	mb, mc := alternate(b, std, mine)
	b.ReportMetric(mb, "ns-baseline/3msgs")
	b.ReportMetric(mc, "ns-append/3msgs")
	b.ReportMetric(mb/mc, "x-faster")
}
