package planner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/planner"
)

const tickRequest = `{"kind":"plan","plan":{"tools":[{"toolId":"a","skill":"echo","input":{"tick":true}}]}}`

// subjectsUnder counts the messages of stream on each subject under
// prefix.
func (h *harness) subjectsUnder(stream, prefix string) map[string]uint64 {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := h.conn.JS.Stream(ctx, stream)
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(prefix+">"))
	if err != nil {
		h.t.Fatal(err)
	}
	return info.State.Subjects
}

// A schedule ticking every second, three planners running: each of at
// least ten ticks becomes one request, NAME-<the tick's sequence>, and no
// tick two.
func TestAScheduleTicksOnceAcrossThreePlanners(t *testing.T) {
	h := start(t, planner.Config{}, simulated(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for range 2 {
		if _, err := h.node.AddPlanner(ctx, planner.Config{}, zerolog.Nop()); err != nil {
			t.Fatal(err)
		}
	}
	sc, err := h.c.AddSchedule(ctx, planbus.ScheduleSpec{Name: "every-second", Cron: "@every 1s", Request: json.RawMessage(tickRequest)})
	if err != nil {
		t.Fatal(err)
	}
	if sc.Name != "every-second" || sc.Paused || sc.CreatedAt.IsZero() {
		t.Errorf("added %+v", sc)
	}
	bustest.Eventually(t, time.Minute, "ten ticks", func() (bool, string) {
		list, err := h.c.Schedules(ctx)
		if err != nil || len(list) != 1 {
			return false, fmt.Sprintf("%v, %v", list, err)
		}
		return list[0].Ticks >= 10, fmt.Sprintf("%d ticks", list[0].Ticks)
	})
	if _, err := h.c.PauseSchedule(ctx, "every-second"); err != nil {
		t.Fatal(err)
	}
	ticks := h.subjectsUnder(bus.StreamSchedules, "planbus.schedules.tick.")
	fired := int(ticks[bus.ScheduleTickSubject("every-second")])

	// Every tick's request is accepted once (the planners may still be
	// at the last ones).
	var requests map[string]uint64
	bustest.Eventually(t, time.Minute, "a request a tick", func() (bool, string) {
		requests = h.subjectsUnder(bus.StreamRequests, "planbus.requests.every-second-")
		return len(requests) >= fired, fmt.Sprintf("%d requests of %d ticks", len(requests), fired)
	})
	if len(requests) != fired {
		t.Errorf("%d ticks made %d requests", fired, len(requests))
	}
	for subject, n := range requests {
		if n != 1 {
			t.Errorf("%s stored %d times", subject, n)
		}
	}
	// The ticks are the stream's messages on the tick subject: each
	// request names one of them.
	st, err := h.conn.JS.Stream(ctx, bus.StreamSchedules)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen, last := 0, uint64(0)
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject != bus.ScheduleTickSubject("every-second") {
			continue
		}
		seen, last = seen+1, seq
		if requests[bus.RequestSubject(fmt.Sprintf("every-second-%d", seq))] != 1 {
			t.Errorf("tick %d has no request every-second-%d", seq, seq)
		}
	}
	if seen != fired {
		t.Errorf("read %d ticks, the stream counts %d", seen, fired)
	}
	// A tick's request runs like any other.
	if out := h.await(fmt.Sprintf("every-second-%d", last)); !out.Success {
		t.Errorf("the last tick's request ended %s", out.Status)
	}
}

// What the schedule endpoints refuse, naming the field; and pause,
// resume and remove.
func TestScheduleEndpoints(t *testing.T) {
	h := start(t, planner.Config{}, simulated(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range []struct {
		spec  planbus.ScheduleSpec
		field string
		says  string
	}{
		{planbus.ScheduleSpec{Name: "a.b", Cron: "@hourly", Request: json.RawMessage(tickRequest)}, "/name", "schedule name"},
		{planbus.ScheduleSpec{Name: "x", Cron: "", Request: json.RawMessage(tickRequest)}, "/cron", "want a pattern"},
		{planbus.ScheduleSpec{Name: "x", Cron: "61 * * * * *", Request: json.RawMessage(tickRequest)}, "/cron", "refuses the pattern"},
		{planbus.ScheduleSpec{Name: "x", Cron: "@every 100ms", Request: json.RawMessage(tickRequest)}, "/cron", "refuses the pattern"},
		{planbus.ScheduleSpec{Name: "x", Cron: "0 0 2 * * *", TimeZone: "Mars/Olympus", Request: json.RawMessage(tickRequest)}, "/timeZone", "IANA"},
		{planbus.ScheduleSpec{Name: "x", Cron: "@hourly", Request: json.RawMessage(`{"kind":"nope"}`)}, "/request", ""},
		{planbus.ScheduleSpec{Name: "x", Cron: "@hourly"}, "/request", "missing"},
	} {
		_, err := h.c.AddSchedule(ctx, c.spec)
		var rej *client.RejectedError
		if !errors.As(err, &rej) || !strings.HasPrefix(rej.Reply.Error.Field, c.field) || !strings.Contains(rej.Reply.Error.Message, c.says) {
			t.Errorf("%+v: %v; want a refusal at %s saying %q", c.spec, err, c.field, c.says)
		}
	}
	if list, err := h.c.Schedules(ctx); err != nil || len(list) != 0 {
		t.Fatalf("after refusals: %v, %v; want no schedule", list, err)
	}
	spec := planbus.ScheduleSpec{Name: "nightly", Cron: "0 30 2 * * *", TimeZone: "Europe/Lisbon", Request: json.RawMessage(tickRequest)}
	if _, err := h.c.AddSchedule(ctx, spec); err != nil {
		t.Fatal(err)
	}
	var rej *client.RejectedError
	if _, err := h.c.AddSchedule(ctx, spec); !errors.As(err, &rej) || !strings.Contains(rej.Reply.Error.Message, "exists") {
		t.Errorf("the same name again: %v; want a refusal saying it exists", err)
	}
	if sc, err := h.c.PauseSchedule(ctx, "nightly"); err != nil || !sc.Paused {
		t.Fatalf("pause: %+v, %v", sc, err)
	}
	if list, err := h.c.Schedules(ctx); err != nil || len(list) != 1 || !list[0].Paused || list[0].TimeZone != "Europe/Lisbon" {
		t.Fatalf("after pause: %+v, %v", list, err)
	}
	if sc, err := h.c.ResumeSchedule(ctx, "nightly"); err != nil || sc.Paused {
		t.Fatalf("resume: %+v, %v", sc, err)
	}
	if _, err := h.c.RemoveSchedule(ctx, "nightly"); err != nil {
		t.Fatal(err)
	}
	if list, err := h.c.Schedules(ctx); err != nil || len(list) != 0 {
		t.Fatalf("after rm: %+v, %v", list, err)
	}
	if _, err := h.c.RemoveSchedule(ctx, "nightly"); !errors.As(err, &rej) || rej.Reply.Error.Code != planbus.CodeNotFound {
		t.Errorf("rm of a removed schedule: %v; want NOT_FOUND", err)
	}
	// Nothing of it is left in the stream.
	if left := h.subjectsUnder(bus.StreamSchedules, "planbus.schedules."); len(left) != 0 {
		t.Errorf("left in the stream: %v", left)
	}
}
