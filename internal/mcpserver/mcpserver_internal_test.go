package mcpserver

import (
	"errors"
	"fmt"
	"testing"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
)

// A tool error's text starts with the planbus code, and names the field
// of a refusal that has one.
func TestToolErrorLeadsWithTheCode(t *testing.T) {
	rejected := &client.RejectedError{Reply: planbus.Rejected{Error: planbus.ReplyError{
		Code: planbus.CodeInvalidRequest, Message: "unknown skill \"x\"", Field: "/tools/0/skill"}}}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{rejected, `INVALID_REQUEST: at /tools/0/skill: unknown skill "x"`},
		{fmt.Errorf("status: %w", client.ErrNotFound), "NOT_FOUND: status: client: not found"},
		{errors.New("nats: timeout"), "UNAVAILABLE: nats: timeout"},
	} {
		got := ""
		if err := toolError(tc.err); err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("toolError(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
	if _, err := encode("plan", nil); err == nil || err.Error() != "INVALID_REQUEST: plan: want a JSON object" {
		t.Errorf("encode(nil) = %v", err)
	}
}
