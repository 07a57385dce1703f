package planbus

import (
	"encoding/json"
	"time"
)

// ScheduleSpec is a schedule to add (planbus.schedule.add): the request
// the planners submit at each tick of Cron, once across any number of
// them.
type ScheduleSpec struct {
	// Name names the schedule: 1 to 64 letters, digits, '_' or '-'. Each
	// tick's request id is NAME-<the tick's sequence>.
	Name string `json:"name"`
	// Cron is when it ticks, as the NATS server's message schedules take
	// it: six fields with seconds ("0 30 2 * * *": 02:30:00 every day),
	// @hourly, @daily, @weekly, @monthly, @yearly, or @every DURATION (at
	// least 1s).
	Cron string `json:"cron"`
	// TimeZone is the IANA zone of a cron pattern (default UTC).
	TimeZone string `json:"timeZone,omitempty"`
	// Request is the plan request (schemas/plan-request.schema.json)
	// sent at each tick; its requestId is replaced by the tick's.
	Request json.RawMessage `json:"request"`
	// Missed says what becomes of ticks due while the system was down:
	// MissedSkip (the default) skips them, MissedCatchUp submits one of
	// them when a planner starts, as NAME-missed-<its due time, Unix
	// seconds>, once whatever the number of planners.
	Missed string `json:"missed,omitempty"`
}

// What a schedule does with ticks missed while the system was down
// (ScheduleSpec.Missed).
const (
	MissedSkip    = "skip"
	MissedCatchUp = "catchup"
)

// Schedule is a schedule as the planners keep and list it.
type Schedule struct {
	ScheduleSpec
	// Owner is the named client that added it ("" for the shared client
	// role); its ticks' requests are that client's.
	Owner     string    `json:"owner,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	// Paused: it does not tick until resumed; ResumedAt is when it was
	// last resumed (what it skipped while paused was not missed).
	Paused    bool      `json:"paused,omitempty"`
	ResumedAt time.Time `json:"resumedAt,omitzero"`
	// LastTick and LastRequestID are its latest tick and the request it
	// made; Ticks counts the ticks its stream keeps (at most the last
	// 100). Listing only.
	LastTick      time.Time `json:"lastTick,omitzero"`
	LastRequestID string    `json:"lastRequestId,omitempty"`
	Ticks         int       `json:"ticks,omitempty"`
}

// ScheduleName names the schedule of planbus.schedule.rm, .pause and
// .resume.
type ScheduleName struct {
	Name string `json:"name"`
}

// ScheduleList is planbus.schedule.list's reply, by name.
type ScheduleList struct {
	Schedules []Schedule `json:"schedules"`
}
