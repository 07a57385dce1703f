package skills

import (
	"bytes"
	"io"
	"strings"
)

// capWriter keeps the first max bytes written to it and drops the rest,
// reporting every write as complete, so a chatty program can neither fill
// the worker's memory nor stall on a full pipe. It is not safe for
// concurrent use; os/exec gives each stream its own copying goroutine.
type capWriter struct {
	buf       []byte
	max       int
	truncated bool
}

func (w *capWriter) Write(p []byte) (int, error) {
	keep := p
	if room := w.max - len(w.buf); len(p) > room {
		w.truncated = true
		keep = p[:max(room, 0)]
	}
	w.buf = append(w.buf, keep...)
	return len(p), nil
}

// readCapped reads r up to n bytes and reports whether there was more.
func readCapped(r io.Reader, n int) (b []byte, truncated bool, err error) {
	b, err = io.ReadAll(io.LimitReader(r, int64(n)+1))
	if len(b) > n {
		return b[:n], true, nil
	}
	return b, false, err
}

// firstLine returns the first non-blank line of b, at most limit bytes of
// it, as valid UTF-8: enough of a program's complaint for an error message.
func firstLine(b []byte, limit int) string {
	b = bytes.TrimLeft(b, " \t\r\n")
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	b = bytes.TrimRight(b, " \t\r")
	more := len(b) > limit
	if more {
		b = b[:limit]
	}
	line := strings.ToValidUTF8(string(b), "\uFFFD")
	if more {
		line += "..."
	}
	return line
}
