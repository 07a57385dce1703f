package client

import (
	"context"
	"encoding/json"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
)

// AddSchedule adds a schedule: the planners submit spec.Request at each
// tick of spec.Cron, once across any number of them, as the request
// NAME-<the tick's sequence>. A name in use, a pattern the NATS server
// refuses or a request the planner would refuse is a *RejectedError
// naming the field.
func (c *Client) AddSchedule(ctx context.Context, spec planbus.ScheduleSpec) (*planbus.Schedule, error) {
	body, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	var sc planbus.Schedule
	if err := c.call(ctx, bus.SubjectScheduleAdd, body, &sc); err != nil {
		return nil, err
	}
	return &sc, nil
}

// Schedules lists the schedules by name (a named client's own), each
// with its last tick.
func (c *Client) Schedules(ctx context.Context) ([]planbus.Schedule, error) {
	var list planbus.ScheduleList
	if err := c.call(ctx, bus.SubjectScheduleList, []byte(`{}`), &list); err != nil {
		return nil, err
	}
	return list.Schedules, nil
}

// RemoveSchedule removes schedule name and its kept ticks; requests it
// made are left as they are. An unknown name is a *RejectedError with
// code planbus.CodeNotFound.
func (c *Client) RemoveSchedule(ctx context.Context, name string) (*planbus.Schedule, error) {
	return c.scheduleVerb(ctx, bus.SubjectScheduleRemove, name)
}

// PauseSchedule stops schedule name's ticks until ResumeSchedule; ticks
// due meanwhile are skipped.
func (c *Client) PauseSchedule(ctx context.Context, name string) (*planbus.Schedule, error) {
	return c.scheduleVerb(ctx, bus.SubjectSchedulePause, name)
}

// ResumeSchedule starts a paused schedule's ticks again.
func (c *Client) ResumeSchedule(ctx context.Context, name string) (*planbus.Schedule, error) {
	return c.scheduleVerb(ctx, bus.SubjectScheduleResume, name)
}

func (c *Client) scheduleVerb(ctx context.Context, subject, name string) (*planbus.Schedule, error) {
	body, err := json.Marshal(planbus.ScheduleName{Name: name})
	if err != nil {
		return nil, err
	}
	var sc planbus.Schedule
	if err := c.call(ctx, subject, body, &sc); err != nil {
		return nil, err
	}
	return &sc, nil
}
