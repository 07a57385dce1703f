package mcpskills

import (
	"bytes"
	"io"
	"sync"
)

// maxLine bounds a line PrefixLines holds back waiting for its end.
const maxLine = 64 << 10

// PrefixLines is a writer that writes each line written to it to w with
// prefix before it: a server's standard error among the worker's log. A
// line longer than 64 KiB is cut into lines of that length.
func PrefixLines(w io.Writer, prefix string) io.Writer {
	return &prefixer{w: w, prefix: []byte(prefix)}
}

type prefixer struct {
	mu     sync.Mutex
	w      io.Writer
	prefix []byte
	line   []byte
}

func (p *prefixer) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			room := maxLine - len(p.line)
			if len(b) < room {
				p.line = append(p.line, b...)
				return n, nil
			}
			p.line = append(p.line, b[:room]...)
			b = b[room:]
		} else {
			p.line = append(p.line, b[:i]...)
			b = b[i+1:]
		}
		out := append(append(append(make([]byte, 0, len(p.prefix)+len(p.line)+1), p.prefix...), p.line...), '\n')
		p.line = p.line[:0]
		if _, err := p.w.Write(out); err != nil {
			return n, err
		}
	}
	return n, nil
}
