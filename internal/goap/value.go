package goap

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// Type is the type of a fact.
type Type string

// The fact types.
const (
	Bool   Type = "bool"
	Number Type = "number"
	String Type = "string"
)

// kind is a value's type, with absent for a fact the state lacks.
type kind uint8

const (
	absent kind = iota
	kBool
	kNumber
	kString
)

func (t Type) kind() kind {
	switch t {
	case Bool:
		return kBool
	case Number:
		return kNumber
	}
	return kString
}

// value is one fact's value. Bools are kept in num (0 or 1), so equality
// is one comparison of kind, num and str.
type value struct {
	k   kind
	num float64
	str string
}

func boolValue(b bool) value {
	if b {
		return value{k: kBool, num: 1}
	}
	return value{k: kBool}
}

func numValue(f float64) value {
	if f == 0 {
		f = 0 // -0 and 0 are one state
	}
	return value{k: kNumber, num: f}
}

// valueOf converts a Go value from a decoded JSON document or a caller's
// State: bool, string, any Go number or json.Number. It refuses nil, NaN,
// infinities and everything else.
func valueOf(x any) (value, error) {
	var f float64
	switch v := x.(type) {
	case bool:
		return boolValue(v), nil
	case string:
		if len(v) > MaxString {
			return value{}, fmt.Errorf("a string of %d bytes; a fact holds at most %d", len(v), MaxString)
		}
		return value{k: kString, str: v}, nil
	case float64:
		f = v
	case float32:
		f = float64(v)
	case int:
		f = float64(v)
	case int8:
		f = float64(v)
	case int16:
		f = float64(v)
	case int32:
		f = float64(v)
	case int64:
		f = float64(v)
	case uint:
		f = float64(v)
	case uint8:
		f = float64(v)
	case uint16:
		f = float64(v)
	case uint32:
		f = float64(v)
	case uint64:
		f = float64(v)
	case json.Number:
		var err error
		if f, err = v.Float64(); err != nil {
			return value{}, fmt.Errorf("number %s out of range", v)
		}
	case nil:
		return value{}, fmt.Errorf("null is not a fact value")
	default:
		return value{}, fmt.Errorf("%T is not a fact value (bool, number or string)", x)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return value{}, fmt.Errorf("number %v is not finite", f)
	}
	return numValue(f), nil
}

// any returns the value as bool, float64 or string; nil when absent.
func (v value) any() any {
	switch v.k {
	case kBool:
		return v.num != 0
	case kNumber:
		return v.num
	case kString:
		return v.str
	}
	return nil
}

// typ names the value's type as the domain format does.
func (v value) typ() Type {
	switch v.k {
	case kBool:
		return Bool
	case kNumber:
		return Number
	case kString:
		return String
	}
	return ""
}

// String formats the value as JSON, or "absent".
func (v value) String() string {
	switch v.k {
	case kBool:
		return strconv.FormatBool(v.num != 0)
	case kNumber:
		return formatNumber(v.num)
	case kString:
		return strconv.Quote(v.str)
	}
	return "absent"
}

// text is the value as template text: strings bare, absent as "".
func (v value) text() string {
	if v.k == kString {
		return v.str
	}
	if v.k == absent {
		return ""
	}
	return v.String()
}

func formatNumber(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
