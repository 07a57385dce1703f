// Package schemas holds the JSON Schemas (draft 2020-12) of every message
// that crosses the bus, embedded in the binary, and validates documents
// against them (Validate), with errors that name the field and the rule.
// The schema files are the contract, for Go and for any other language;
// the Go types of package planbus (the module root) mirror them.
package schemas
