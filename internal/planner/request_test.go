package planner

import (
	"errors"
	"strings"
	"testing"
)

func TestDecodeRequestDefaults(t *testing.T) {
	r, err := DecodeRequest([]byte(`{"kind":"external","planner":"planners.x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.SessionID != "default" || r.MaxAttempts != DefaultMaxAttempts {
		t.Errorf("defaults: session %q, maxAttempts %d", r.SessionID, r.MaxAttempts)
	}
	r, err = DecodeRequest([]byte(`{"kind":"plan","plan":{"tools":[]}}`))
	if err != nil || r.MaxAttempts != 1 {
		t.Errorf("kind plan: maxAttempts %d, err %v; want 1", r.MaxAttempts, err)
	}
	r, err = DecodeRequest([]byte(`{"kind":"htn","htn":{"program":"a.","goal":"a","traces":true}}`))
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
		_, err := DecodeRequest([]byte(tt.doc))
		if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want %q", tt.doc, err, tt.want)
		}
	}
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"kind":"plan","plan":{"tools":[{"toolId":"a","skill":"echo"}]}}`))
	f.Add([]byte(`{"kind":"htn","htn":{"program":"a(1).","goal":"a(?x)","facts":["b"]}}`))
	f.Add([]byte(`{"kind":"external","planner":"p.q","input":{"x":[1,2]}}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		r, err := DecodeRequest(doc)
		if err != nil {
			if !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("error %v is not ErrInvalidRequest", err)
			}
			return
		}
		if r.Kind == "" || r.SessionID == "" || r.MaxAttempts < 1 {
			t.Fatalf("decoded request without defaults: %+v", r)
		}
		if r.Kind == KindHTN {
			// Parsing a fuzzed domain must end, with a program or an error.
			_, _ = htnPlanner{}.program(r.HTN, nil)
		}
	})
}
