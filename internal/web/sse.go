package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
)

// Live updates are server-sent events: /events tells the requests pages
// that requests changed, /plans/{id}/events streams a plan's tool states
// and critical path as the plan runs.

// heartbeat is how often an idle stream sends a comment, so that a
// browser that went away is noticed and proxies keep the stream open.
const heartbeat = 15 * time.Second

// sse writes one event stream.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// startSSE answers r with an event stream. Streams have no write
// deadline: they last as long as the page is open.
func startSSE(w http.ResponseWriter) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	w.WriteHeader(http.StatusOK)
	e := &sse{w: w, rc: rc}
	_ = e.comment("stream open")
	return e
}

// send writes an event named name whose data is v as JSON.
func (e *sse) send(name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", name, data); err != nil {
		return err
	}
	return e.rc.Flush()
}

func (e *sse) comment(text string) error {
	if _, err := fmt.Fprintf(e.w, ": %s\n\n", text); err != nil {
		return err
	}
	return e.rc.Flush()
}

// stream takes one of the live stream slots (Config.MaxStreams) and
// returns a context that ends when the visitor leaves or the Server
// closes, and the function that gives the slot back; ok is false, and
// the visitor told, when every slot is taken.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) (ctx context.Context, done func(), ok bool) {
	select {
	case s.streams <- struct{}{}:
	default:
		http.Error(w, fmt.Sprintf("web: %d live streams are open, the most this view serves; close a page and try again", s.cfg.MaxStreams),
			http.StatusServiceUnavailable)
		return nil, nil, false
	}
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() { stop(); cancel(); <-s.streams }, true
}

// changes tells the requests pages when requests change: an event
// "changed" at most once a second while request or plan events arrive,
// of every request or, with ?request=ID, of one. With ?status= and
// ?plan= (what the page shows of the request), a request that has moved
// on since is "changed" at once.
func (s *Server) changes(w http.ResponseWriter, r *http.Request) {
	subjects := []string{"planbus.events.*.request.>", "planbus.events.*.plan.>"}
	if id := r.URL.Query().Get("request"); id != "" {
		if !idPattern.MatchString(id) {
			http.Error(w, fmt.Sprintf("web: %q is not a request id", id), http.StatusBadRequest)
			return
		}
		subjects = []string{"planbus.events." + id + ".request.>", "planbus.events." + id + ".plan.>"}
	}
	ctx, done, ok := s.stream(w, r)
	if !ok {
		return
	}
	defer done()
	signal := make(chan struct{}, 1)
	for _, subj := range subjects {
		sub, err := s.nc.Subscribe(subj, func(*nats.Msg) {
			select {
			case signal <- struct{}{}:
			default:
			}
		})
		if err != nil {
			http.Error(w, "web: cannot follow the events: "+err.Error(), http.StatusBadGateway)
			return
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	e := startSSE(w)
	if id := r.URL.Query().Get("request"); id != "" && r.URL.Query().Has("status") {
		// The page was rendered before the stream subscribed: if the
		// request moved on in between, say so now.
		sctx, cancel := context.WithTimeout(ctx, pageTimeout)
		st, err := s.cl.Status(sctx, id)
		cancel()
		if err == nil && st.Request != nil && (string(st.Request.Status) != r.URL.Query().Get("status") || st.Request.PlanID != r.URL.Query().Get("plan")) {
			select {
			case signal <- struct{}{}:
			default: // an event said so already
			}
		}
	}
	const every = time.Second
	var last time.Time
	dirty := false
	tick := time.NewTicker(every)
	defer tick.Stop()
	idle := time.Now()
	for {
		var err error
		select {
		case <-ctx.Done():
			return
		case <-signal:
			if time.Since(last) >= every {
				err, last, dirty = e.send("changed", nil), time.Now(), false
			} else {
				dirty = true
			}
		case now := <-tick.C:
			switch {
			case dirty:
				err, last, dirty = e.send("changed", nil), now, false
			case now.Sub(last) >= heartbeat && now.Sub(idle) >= heartbeat:
				err, idle = e.comment("idle"), now
			}
		}
		if err != nil {
			return
		}
	}
}

// toolUpdate is what a plan's stream says of a tool.
type toolUpdate struct {
	ID         string            `json:"id"`
	State      planbus.ToolState `json:"state"`
	Attempt    int               `json:"attempt"`
	Skill      string            `json:"skill"`
	Worker     string            `json:"worker,omitempty"`
	DurationMs float64           `json:"durationMs,omitempty"`
}

func update(t *toolView) toolUpdate {
	return toolUpdate{ID: t.ID, State: t.State, Attempt: t.Attempt, Skill: t.Skill, Worker: t.WorkerID, DurationMs: t.DurationMs}
}

// snapshot is every tool's state, the plan's and the critical path.
type snapshot struct {
	State    planbus.PlanState `json:"state"`
	Tools    []toolUpdate      `json:"tools"`
	Critical []string          `json:"critical"`
}

func snap(m *planModel, now time.Time) snapshot {
	sn := snapshot{State: m.State, Critical: m.critical(now), Tools: make([]toolUpdate, len(m.Tools))}
	for i, t := range m.Tools {
		sn.Tools[i] = update(t)
	}
	return sn
}

// planEnded reports whether a plan state is an end.
func planEnded(state planbus.PlanState) bool { return state != "" && state != planbus.PlanRunning }

// planEvents streams a plan's run: a "snapshot" of every tool first, then
// a "tool" event for each change of a tool's state, "critical" when the
// critical path changes (checked twice a second, as running tools grow
// longer), "plan" when the plan's state changes, and "end" once its
// execution result is in; then the stream closes. A plan that has ended
// gets its snapshot and "done".
func (s *Server) planEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !idPattern.MatchString(id) {
		http.Error(w, fmt.Sprintf("web: %q is not a plan id", id), http.StatusBadRequest)
		return
	}
	ctx, done, ok := s.stream(w, r)
	if !ok {
		return
	}
	defer done()
	rctx, cancel := context.WithTimeout(ctx, pageTimeout)
	m, err := s.planData(rctx, id, false)
	cancel()
	switch {
	case errors.Is(err, errNotFound), errors.Is(err, client.ErrNotFound):
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	e := startSSE(w)
	if e.send("snapshot", snap(m, time.Now())) != nil {
		return
	}
	if planEnded(m.State) {
		_ = e.send("done", map[string]string{"state": string(m.State)})
		return
	}

	// The client replays the plan's past events, then the live ones; the
	// model keeps only what moves a tool forward.
	var mu sync.Mutex
	var queue []planbus.Event
	wake := make(chan struct{}, 1)
	type result struct {
		res *planbus.ExecutionResult
		err error
	}
	finished := make(chan result, 1)
	go func() {
		res, err := s.cl.WatchPlan(ctx, id, func(ev planbus.Event) {
			mu.Lock()
			queue = append(queue, ev)
			mu.Unlock()
			select {
			case wake <- struct{}{}:
			default:
			}
		})
		finished <- result{res, err}
	}()
	take := func() []planbus.Event {
		mu.Lock()
		defer mu.Unlock()
		q := queue
		queue = nil
		return q
	}
	critical := m.critical(time.Now())
	applyAll := func() error {
		for _, ev := range take() {
			t, planChanged := m.apply(ev)
			if t != nil {
				if err := e.send("tool", update(t)); err != nil {
					return err
				}
			}
			if planChanged {
				if err := e.send("plan", map[string]string{"state": string(m.State)}); err != nil {
					return err
				}
			}
		}
		return nil
	}
	sendCritical := func(now time.Time) error {
		c := m.critical(now)
		if slices.Equal(c, critical) {
			return nil
		}
		critical = c
		return e.send("critical", c)
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	last := time.Now()
	for {
		var err error
		select {
		case <-ctx.Done():
			return
		case <-wake:
			err = applyAll()
		case now := <-tick.C:
			err = sendCritical(now)
			if err == nil && now.Sub(last) >= heartbeat {
				err, last = e.comment("running"), now
			}
		case fin := <-finished:
			if fin.err != nil {
				if ctx.Err() == nil {
					_ = e.send("failure", map[string]string{"message": fin.err.Error()})
				}
				return
			}
			if applyAll() != nil {
				return
			}
			m.applyExecution(fin.res)
			if e.send("snapshot", snap(m, time.Now())) != nil {
				return
			}
			_ = e.send("end", map[string]string{"state": string(m.State)})
			return
		}
		if err != nil {
			return
		}
	}
}
