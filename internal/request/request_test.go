package request

import (
	"errors"
	"strings"
	"testing"

	"github.com/planbus/planbus"
)

func TestDecodeRequestDefaults(t *testing.T) {
	r, err := Decode([]byte(`{"kind":"external","planner":"planners.x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.SessionID != planbus.DefaultSession || r.MaxAttempts != DefaultMaxAttempts {
		t.Errorf("defaults: session %q, maxAttempts %d", r.SessionID, r.MaxAttempts)
	}
	r, err = Decode([]byte(`{"kind":"plan","plan":{"tools":[]}}`))
	if err != nil || r.MaxAttempts != 1 {
		t.Errorf("kind plan: maxAttempts %d, err %v; want 1", r.MaxAttempts, err)
	}
	r, err = Decode([]byte(`{"kind":"htn","htn":{"program":"a.","goal":"a","traces":true}}`))
	if err != nil || !r.HTN.Traces {
		t.Errorf("htn.traces: %+v, err %v; want traces", r.HTN, err)
	}
}

func TestDecodeRequestErrors(t *testing.T) {
	tests := []struct{ doc, want string }{
		{`{"kind":"htn","htn":{"goal":"x"}}`, "at /htn"},
		{`{"kind":"external"}`, "missing property 'planner'"},
		{`{"kind":"external","planner":"a b"}`, "at /planner"},
		{`{"kind":"plan","plan":{},"extra":1}`, "additional properties 'extra'"},
		{`{"kind":"plan","plan":{},"maxAttempts":0}`, "at /maxAttempts"},
		{`{"kind":"htn","htn":{"program":"a.","goal":"a","traces":1}}`, "at /htn/traces"},
	}
	for _, tt := range tests {
		_, err := Decode([]byte(tt.doc))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want %q", tt.doc, err, tt.want)
		}
	}
}
