package client_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus/bustest"
)

// cutter is a TCP proxy on 127.0.0.1 in front of a NATS server that can
// hold what clients send and then cut every connection, so that a test
// can drop a connection at a chosen point of the protocol.
type cutter struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	hold    bool
	held    bytes.Buffer
	conns   []net.Conn
	pinged  chan struct{} // closed once a PING is held
	pingSet bool
}

func newCutter(t *testing.T, target string) *cutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutter{ln: ln, target: strings.TrimPrefix(target, "nats://"), pinged: make(chan struct{})}
	t.Cleanup(func() {
		_ = ln.Close()
		p.cut()
	})
	go p.accept()
	return p
}

func (p *cutter) url() string { return "nats://" + p.ln.Addr().String() }

func (p *cutter) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(c, s) }()
		go p.forward(c, s)
	}
}

// forward copies what the client sends, unless it is held.
func (p *cutter) forward(c, s net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if err != nil {
			_ = s.Close()
			return
		}
		p.mu.Lock()
		hold := p.hold
		if hold {
			p.held.Write(buf[:n])
			if !p.pingSet && bytes.Contains(p.held.Bytes(), []byte("PING\r\n")) {
				p.pingSet = true
				close(p.pinged)
			}
		}
		p.mu.Unlock()
		if !hold {
			if _, err := s.Write(buf[:n]); err != nil {
				_ = c.Close()
				return
			}
		}
	}
}

// holdSends starts holding what clients send.
func (p *cutter) holdSends() {
	p.mu.Lock()
	p.hold = true
	p.mu.Unlock()
}

// cut closes every connection, drops what was held and lets new
// connections through.
func (p *cutter) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
	p.hold = false
	p.held.Reset()
}

// A connection that drops while Await makes sure of its subscription (a
// flush in flight, which nats.go ends with "connection closed" although it
// reconnects) does not end the wait: the client reconnects and returns
// the outcome.
func TestAwaitOutlivesAConnectionDroppedMidFlush(t *testing.T) {
	cfg := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	direct, err := client.New(bustest.Dial(t, cfg).NC)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Run(ctx, []byte(`{"requestId": "r1", "kind": "plan", "plan": {"tools": [{"toolId": "A", "skill": "echo"}]}}`), nil); err != nil {
		t.Fatal(err)
	}

	p := newCutter(t, cfg.URL)
	nc, err := nats.Connect(p.url(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c, err := client.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	p.holdSends()
	type result struct {
		success bool
		err     error
	}
	done := make(chan result, 1)
	go func() {
		out, err := c.Await(ctx, "r1")
		done <- result{out != nil && out.Success, err}
	}()
	select {
	case <-p.pinged:
	case <-ctx.Done():
		t.Fatal("Await sent no flush")
	}
	p.cut()
	select {
	case r := <-done:
		if r.err != nil || !r.success {
			t.Fatalf("Await across a dropped connection: success %v, %v", r.success, r.err)
		}
	case <-ctx.Done():
		t.Fatal("Await did not return after the reconnection")
	}
}
