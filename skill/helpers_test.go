package skill_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/skill"
)

// newCall returns attempt 1 of a call of skillName with the given input.
func newCall(skillName, input string) *skill.Call {
	return &skill.Call{PlanID: "p1", RequestID: "r1", ToolID: "t1", Skill: skillName,
		Attempt: 1, MaxAttempts: 3, Input: json.RawMessage(input)}
}

// wantError fails the test unless err is a *skill.Error of the category
// and code, and returns it.
func wantError(t *testing.T, err error, category planbus.Category, code planbus.Code) *skill.Error {
	t.Helper()
	var se *skill.Error
	if !errors.As(err, &se) {
		t.Fatalf("got error %v (%T), want a *skill.Error %s/%s", err, err, category, code)
	}
	if se.Category != category || se.Code != code {
		t.Fatalf("got %s/%s (%s), want %s/%s", se.Category, se.Code, se.Message, category, code)
	}
	return se
}

// wantMessage fails the test unless err's text contains every part.
func wantMessage(t *testing.T, err error, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("got message %q, want it to contain %q", err.Error(), p)
		}
	}
}
