package request

import (
	"errors"
	"strings"
	"testing"
)

func TestDecodeApproveErrors(t *testing.T) {
	tests := []struct{ doc, field string }{
		{`{"toolId":"a","approve":true}`, ""},
		{`{"requestId":"r","planId":"p","toolId":"a","approve":true}`, ""},
		{`{"requestId":"r","approve":true}`, ""},
		{`{"requestId":"r","toolId":"a"}`, ""},
		{`{"requestId":"r","toolId":"a b","approve":true}`, "/toolId"},
		{`{"requestId":"r","toolId":"a","approve":"yes"}`, "/approve"},
		{`{"requestId":"r","toolId":"a","approve":true,"reason":"` + strings.Repeat("x", 1025) + `"}`, "/reason"},
		{`{"requestId":"r","toolId":"a","approve":true,"extra":1}`, ""},
	}
	for _, tt := range tests {
		_, err := DecodeApprove([]byte(tt.doc))
		var re *Error
		if !errors.As(err, &re) {
			t.Errorf("%s: got %v, want a request error", tt.doc, err)
			continue
		}
		if tt.field != "" && re.Field != tt.field {
			t.Errorf("%s: field %q, want %q (%v)", tt.doc, re.Field, tt.field, err)
		}
	}
	q, err := DecodeApprove([]byte(`{"planId":"p-1","toolId":"deploy","approve":false,"reason":"  no  "}`))
	if err != nil || q.PlanID != "p-1" || q.ToolID != "deploy" || q.Approve || q.Reason != "no" {
		t.Errorf("decoded %+v, %v", q, err)
	}
}

func FuzzDecodeApprove(f *testing.F) {
	for _, s := range []string{`{"requestId":"r1","toolId":"a","approve":true}`, `{"planId":"p-1","toolId":"b","approve":false,"reason":"x"}`,
		`{}`, `{"requestId":"a","planId":"b","toolId":"c","approve":true}`, `[`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		q, err := DecodeApprove(doc)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not an invalid request", err)
			}
			return
		}
		if (q.RequestID == "") == (q.PlanID == "") || q.ToolID == "" {
			t.Fatalf("decoded %+v: want exactly one id and a tool", q)
		}
	})
}

func FuzzDecodeCancel(f *testing.F) {
	for _, s := range []string{`{"requestId":"r1"}`, `{"planId":"p-1","reason":"x"}`, `{}`, `{"requestId":"a","planId":"b"}`, `[`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		q, err := DecodeCancel(doc)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not an invalid request", err)
			}
			return
		}
		if (q.RequestID == "") == (q.PlanID == "") {
			t.Fatalf("decoded %+v: want exactly one id", q)
		}
	})
}

func FuzzDecodeList(f *testing.F) {
	for _, s := range []string{`{}`, ``, `{"status":"failed","limit":3}`, `{"sessionId":"a.b"}`, `{"limit":0}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		q, err := DecodeList(doc)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not an invalid request", err)
			}
			return
		}
		if q.Limit < 1 || q.Limit > MaxListLimit {
			t.Fatalf("decoded limit %d", q.Limit)
		}
	})
}
