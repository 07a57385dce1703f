package cli

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bus"
)

// TestAcknowledgedResultsSurviveKillNineOfTheServer publishes tool
// results into planner serve's embedded server, kills the process with
// SIGKILL while results are still being published, starts it again on
// the same store, and reads back every result whose publish was
// acknowledged: at the default durability (--sync always) an
// acknowledgement means the result is on the disk, so none may be
// missing or changed. (The same test with the results stream in
// nats-server's async persist mode loses about a tenth of them.)
func TestAcknowledgedResultsSurviveKillNineOfTheServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a real planner process; skipped with -short")
	}
	bins := map[string]string{"planner": buildPlanner(t)}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	url := "nats://" + addr
	p := &procs{t: t, bins: bins, env: append(processEnv(t), "PLANBUS_LOG_LEVEL=error")}
	t.Cleanup(p.stopAll)
	serveArgs := []string{"serve", "--listen", addr, "--data-dir", filepath.Join(t.TempDir(), "store"), "--workers", "0", "--http", ""}
	server := p.start("planner", serveArgs...)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dial := func() *bus.Conn {
		conn, err := bus.Dial(ctx, bus.Config{URL: url}, zerolog.Nop())
		if err != nil {
			t.Fatalf("%v\nplanner serve:\n%s", err, p.output(server))
		}
		for {
			if _, err := conn.NC.Request("$SRV.PING."+bus.ServicePlanner, nil, time.Second); err == nil {
				return conn
			}
			select {
			case <-p.exited(server):
				t.Fatalf("planner serve exited:\n%s", p.output(server))
			case <-ctx.Done():
				t.Fatal("the planner never answered")
			default:
			}
		}
	}
	conn := dial()

	// Publishers send results until the server dies; each acknowledged
	// one is noted with its stream sequence. The kill comes once enough
	// are acknowledged, with publishes still in flight.
	const publishers, killAfter = 8, 400
	type stored struct {
		seq  uint64
		data []byte
	}
	var mu sync.Mutex
	var acked []stored
	enough := make(chan struct{})
	var wg sync.WaitGroup
	for w := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				data := fmt.Appendf(nil, `{"planId":"p%d","toolId":"t%d","attempt":1,"state":"succeeded","output":%d}`, w, i, i)
				pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
				ack, err := conn.JS.Publish(pctx, bus.ResultSubject(fmt.Sprintf("durable-%d", w))+".t", data)
				pcancel()
				if err != nil {
					return // the server is gone
				}
				mu.Lock()
				acked = append(acked, stored{ack.Sequence, data})
				if len(acked) == killAfter {
					close(enough)
				}
				mu.Unlock()
			}
		}()
	}
	select {
	case <-enough:
	case <-ctx.Done():
		t.Fatal("the results were not acknowledged in time")
	}
	p.kill9(server)
	wg.Wait()
	conn.Close()
	mu.Lock()
	n := len(acked)
	mu.Unlock()

	server = p.start("planner", serveArgs...)
	conn = dial()
	defer conn.Close()
	results, err := conn.JS.Stream(ctx, bus.StreamResults)
	if err != nil {
		t.Fatal(err)
	}
	missing := 0
	for _, a := range acked {
		m, err := results.GetMsg(ctx, a.seq)
		switch {
		case err != nil:
			missing++
			if missing <= 5 {
				t.Errorf("result at sequence %d, acknowledged before the kill: %v", a.seq, err)
			}
		case !bytes.Equal(m.Data, a.data):
			t.Errorf("result at sequence %d is %s after the restart, was acknowledged as %s", a.seq, m.Data, a.data)
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged results are missing after kill -9 of the server", missing, n)
	}
	t.Logf("%d results acknowledged before the kill, all read back after the restart", n)
}
