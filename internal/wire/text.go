package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// TextError says where a JSON document holds text that is not Unicode: a
// lone surrogate escape (\ud800 with no \udc00..\udfff after it, or the
// second half alone). encoding/json turns such an escape into U+FFFD,
// so what ran would not be what was sent; JSON v2 decoders, and planbus's
// workers, refuse it.
type TextError struct {
	// Pointer is the JSON pointer of the string value that holds it, or
	// of the object whose member name does (Name is then true).
	Pointer string
	Name    bool
	Offset  int64  // byte offset of the escape in the document
	Escape  string // the escape, as \ud800
}

func (e *TextError) Error() string {
	where := "at " + e.Pointer
	if e.Pointer == "" {
		where = "at /"
	}
	if e.Name {
		where = "in a member name of " + where[3:]
	}
	return fmt.Sprintf("%s: a string holds %s, a lone surrogate escape (half of a UTF-16 pair, not Unicode text) at byte offset %d", where, e.Escape, e.Offset)
}

// CheckText returns a *TextError if the JSON document doc has a string
// (value or member name) with a lone surrogate escape, and nil otherwise,
// also for a document that is not JSON (whoever decodes it says why). It
// reads the document only when it holds an escape of a surrogate, so most
// documents cost one scan for a byte sequence.
func CheckText(doc []byte) error {
	if !hasSurrogateEscape(doc) {
		return nil
	}
	d := jsontext.NewDecoder(bytes.NewReader(doc))
	for {
		_, err := d.ReadToken()
		if err == nil {
			continue
		}
		var se *jsontext.SyntacticError
		if errors.Is(err, io.EOF) || !errors.As(err, &se) || !bytes.Contains([]byte(se.Err.Error()), []byte("surrogate")) {
			return nil
		}
		te := &TextError{Pointer: string(se.JSONPointer), Offset: se.ByteOffset, Escape: "a surrogate"}
		if esc := doc[min(int(se.ByteOffset), len(doc)):]; len(esc) >= 6 && esc[0] == '\\' {
			te.Escape = string(esc[:6])
		}
		// A member name's error points at its object.
		if isName(doc, se.ByteOffset) {
			te.Name = true
		}
		return te
	}
}

// hasSurrogateEscape tells whether doc holds \uD800..\uDFFF in any case.
func hasSurrogateEscape(doc []byte) bool {
	for i := 0; ; {
		j := bytes.Index(doc[i:], []byte(`\u`))
		if j < 0 {
			return false
		}
		i += j + 2
		if i+1 < len(doc) && (doc[i] == 'd' || doc[i] == 'D') {
			switch doc[i+1] {
			case '8', '9', 'a', 'b', 'c', 'd', 'e', 'f', 'A', 'B', 'C', 'D', 'E', 'F':
				return true
			}
		}
	}
}

// isName tells whether the string the escape at offset in doc is part of
// is a member name: the next byte after the string, past white space, is
// a colon.
func isName(doc []byte, offset int64) bool {
	for i := int(offset); i < len(doc); i++ {
		switch doc[i] {
		case '\\':
			i++
		case '"':
			rest := bytes.TrimLeft(doc[i+1:], " \t\r\n")
			return len(rest) > 0 && rest[0] == ':'
		}
	}
	return false
}

// Grouped writes n in decimal with commas between groups of three digits
// (4,000,000), as errors quote limits.
func Grouped(n int64) string {
	s := strconv.FormatInt(n, 10)
	start := 0
	if n < 0 {
		start = 1
	}
	for i := len(s) - 3; i > start; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
