package request

import (
	"encoding/json"
	"strings"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/schemas"
)

// List limits.
const (
	// DefaultListLimit is how many requests a list shows when it does not
	// say.
	DefaultListLimit = 50
	// MaxListLimit is the most a list may ask for.
	MaxListLimit = 1000
)

// DecodeCancel validates a cancel request against its schema and decodes
// it; an error is a *Error naming the field.
func DecodeCancel(doc []byte) (*planbus.CancelRequest, error) {
	if err := schemas.Validate(schemas.CancelRequest, doc); err != nil {
		return nil, SchemaError(err, `want {"requestId": "..."} or {"planId": "..."}, and optionally "reason"`)
	}
	var q planbus.CancelRequest
	if err := json.Unmarshal(doc, &q); err != nil {
		return nil, &Error{Msg: err.Error()}
	}
	q.Reason = strings.TrimSpace(q.Reason)
	return &q, nil
}

// DecodeApprove validates an approve request against its schema and
// decodes it; an error is a *Error naming the field.
func DecodeApprove(doc []byte) (*planbus.ApproveRequest, error) {
	if err := schemas.Validate(schemas.ApproveRequest, doc); err != nil {
		return nil, SchemaError(err, `want {"requestId": "..."} or {"planId": "..."}, "toolId" and "approve": true or false, and optionally "reason"`)
	}
	var q planbus.ApproveRequest
	if err := json.Unmarshal(doc, &q); err != nil {
		return nil, &Error{Msg: err.Error()}
	}
	q.Reason = strings.TrimSpace(q.Reason)
	return &q, nil
}

// DecodeList validates a list request against its schema and decodes it;
// an empty body is the default list. An error is a *Error naming
// the field.
func DecodeList(doc []byte) (*planbus.ListRequest, error) {
	var q planbus.ListRequest
	if len(doc) == 0 {
		doc = []byte(`{}`)
	}
	if err := schemas.Validate(schemas.ListRequest, doc); err != nil {
		return nil, SchemaError(err, `want {"status", "sessionId", "limit", "since", "until", "kind", "text", "before"}, each optional`)
	}
	if err := json.Unmarshal(doc, &q); err != nil {
		return nil, &Error{Msg: err.Error()}
	}
	if q.Limit == 0 {
		q.Limit = DefaultListLimit
	}
	return &q, nil
}
