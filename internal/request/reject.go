package request

import (
	"encoding/json"

	"github.com/nats-io/nats.go/micro"

	"github.com/planbus/planbus"
)

// Reject answers a request to an endpoint with what was wrong with it, in
// the body (for any NATS client) and in the service error headers (for
// nats micro tools).
func Reject(req micro.Request, field, msg string) {
	rej := planbus.Rejected{Status: "rejected", Error: planbus.ReplyError{Code: planbus.CodeInvalidRequest, Message: msg, Field: field}}
	data, _ := json.Marshal(rej)
	_ = req.Error("400", msg, data)
}

// RejectCode answers an endpoint request with a rejection of the given
// code.
func RejectCode(req micro.Request, code planbus.Code, field, msg string) {
	rej := planbus.Rejected{Status: "rejected", Error: planbus.ReplyError{Code: code, Message: msg, Field: field}}
	data, _ := json.Marshal(rej)
	status := "400"
	switch code {
	case planbus.CodeNotFound:
		status = "404"
	case planbus.CodeUnavailable:
		status = "503"
	case planbus.CodeNotWaiting:
		status = "409"
	case planbus.CodeForbidden:
		status = "403"
	}
	_ = req.Error(status, msg, data)
}
