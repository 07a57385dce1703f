package schedule

import (
	"testing"
	"time"
)

// backSince is ticks at 10 and 20 s, none until 61 s, then every 10 s to
// 721 s.
func backSince(at func(int) time.Time) []time.Time {
	ticks := []time.Time{at(10), at(20)}
	for s := 61; s <= 721; s += 10 {
		ticks = append(ticks, at(s))
	}
	return ticks
}

func TestMissedTick(t *testing.T) {
	every, err := cronParser.Parse("@every 10s")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, c := range []struct {
		name  string
		ticks []time.Time
		now   time.Time
		want  time.Time
	}{
		{"on time", []time.Time{at(10), at(20), at(30)}, at(35), time.Time{}},
		{"down until now", []time.Time{at(10), at(20)}, at(55), at(50)},
		{"down, then back (61 is 60's tick, late)", []time.Time{at(10), at(20), at(61), at(71)}, at(75), at(50)},
		{"back for longer than the window", backSince(at), at(725), time.Time{}},
		{"two gaps: the latest", []time.Time{at(10), at(40), at(50), at(90)}, at(95), at(80)},
		{"down for long: the last tick due", []time.Time{at(10), at(40), at(50)}, at(50 + 11*60), at(50 + 11*60 - 10)},
		{"never ticked, just created", nil, at(5), time.Time{}},
		{"late by less than the slack", []time.Time{at(10), at(20).Add(900 * time.Millisecond)}, at(25), time.Time{}},
	} {
		if got := missedTick(every, t0, c.ticks, c.now); !got.Equal(c.want) {
			t.Errorf("%s: missed %v, want %v", c.name, got, c.want)
		}
	}
}
