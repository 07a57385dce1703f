package node_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/node"
)

// dialClient connects as the named client whose seed is in n's seeds.
func dialClient(t *testing.T, ctx context.Context, n *node.Node, name string) (*bus.Conn, *client.Client) {
	t.Helper()
	cfg := n.Bus
	cfg.Role, cfg.NKeySeedFile = bus.RoleClient, n.Seeds.ClientFile(name)
	conn, err := bus.Dial(ctx, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	if conn.Config.Client != name {
		t.Fatalf("the seed client-%s.nk dialled as client %q", name, conn.Config.Client)
	}
	c, err := client.New(conn.NC, client.As(name))
	if err != nil {
		t.Fatal(err)
	}
	return conn, c
}

// startAuthNodeWith starts a node with authorization whose named clients
// are names, each with a seed of its own.
func startAuthNodeWith(t *testing.T, names ...string) *node.Node {
	t.Helper()
	dataDir := t.TempDir()
	for _, name := range names {
		if err := bus.AddClient(filepath.Join(dataDir, "auth"), name); err != nil {
			t.Fatal(err)
		}
	}
	return startAuthNode(t, dataDir, zerolog.Nop())
}

// wantForbidden checks err is a FORBIDDEN rejection naming the owner.
func wantForbidden(t *testing.T, what string, err error, owner string) {
	t.Helper()
	var rej *client.RejectedError
	if !errors.As(err, &rej) || rej.Reply.Error.Code != planbus.CodeForbidden || !strings.Contains(rej.Reply.Error.Message, "client "+owner) {
		t.Errorf("%s: %v; want FORBIDDEN naming client %s", what, err, owner)
	}
}

// Two named clients on a real server with authorization: what alice
// makes is hers. bob may not read her replies (the server refuses the
// subscription), nor cancel, approve or reset what she made, nor send a
// request into her session; neither may the shared client role. alice
// may, and so may an admin on her subjects (issue 23: any client could
// read other clients' replies and cancel, approve or reset anything).
func TestNamedClientsCannotTouchEachOthersWork(t *testing.T) {
	n := startAuthNodeWith(t, "alice", "bob")
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, alice := dialClient(t, ctx, n, "alice")
	bobConn, bob := dialClient(t, ctx, n, "bob")

	// alice's request waits for approval in her session.
	waiting := `{"requestId":"alices","sessionId":"alice-s","kind":"plan","plan":{"timeoutMs":120000,"tools":[
		{"toolId":"deploy","skill":"echo","input":{"n":1},"approval":{"prompt":"Deploy?"}}]}}`
	if _, err := alice.SubmitRequest(ctx, []byte(waiting)); err != nil {
		t.Fatal(err)
	}

	// Replies: bob cannot subscribe to alice's inbox.
	errs := make(chan error, 1)
	bobConn.NC.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case errs <- err:
		default:
		}
	})
	if _, err := bobConn.NC.SubscribeSync(bus.ClientInbox("alice") + ".>"); err != nil {
		t.Fatal(err)
	}
	if err := bobConn.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		if !errors.Is(err, nats.ErrPermissionViolation) {
			t.Errorf("bob subscribing to alice's inbox: %v, want a permissions violation", err)
		}
	case <-ctx.Done():
		t.Fatal("bob's subscription to alice's inbox was not refused")
	}
	// Nor may bob call the endpoints as alice.
	if _, err := bobConn.NC.Request(bus.ClientSubject("alice", bus.SubjectPlanCancel), []byte(`{"requestId":"alices"}`), 5*time.Second); err == nil {
		t.Error("bob published on alice's cancel subject")
	}

	_, err := bob.Cancel(ctx, "alices", "mine now")
	wantForbidden(t, "bob cancels alice's request", err, "alice")
	_, err = bob.Approve(ctx, "alices", "deploy", "")
	wantForbidden(t, "bob approves alice's tool", err, "alice")
	_, err = bob.Inspector().ResetSession(ctx, "alice-s", true)
	wantForbidden(t, "bob resets alice's session", err, "alice")
	_, err = bob.SubmitRequest(ctx, []byte(`{"sessionId":"alice-s","kind":"plan","plan":{"tools":[{"toolId":"x","skill":"echo","input":{}}]}}`))
	wantForbidden(t, "bob sends a request into alice's session", err, "alice")
	_, err = bob.SubmitRequest(ctx, []byte(waiting))
	wantForbidden(t, "bob sends alice's request again", err, "alice")

	// The shared client role may not either.
	shared, err := n.DialAs(ctx, bus.RoleClient, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close()
	_, err = newClient(t, shared).Cancel(ctx, "alices", "")
	wantForbidden(t, "the shared client role cancels alice's request", err, "alice")

	// bob's own work is his.
	if _, err := bob.SubmitRequest(ctx, []byte(`{"requestId":"bobs","sessionId":"bob-s","kind":"plan","plan":{"tools":[{"toolId":"x","skill":"echo","input":{}}]}}`)); err != nil {
		t.Fatalf("bob's own request: %v", err)
	}
	_, err = alice.Cancel(ctx, "bobs", "")
	wantForbidden(t, "alice cancels bob's request", err, "bob")

	// alice approves her own tool; an admin cancels on her subject.
	if _, err := alice.Approve(ctx, "alices", "deploy", "ok"); err != nil {
		t.Fatalf("alice approves her own tool: %v", err)
	}
	o, err := alice.Await(ctx, "alices")
	if err != nil || !o.Success {
		t.Fatalf("alice's request: %v %+v", err, o)
	}
	admin, err := n.DialAs(ctx, bus.RoleAdmin, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	asAlice, err := client.New(admin.NC, client.As("alice"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := asAlice.Inspector().ResetSession(ctx, "alice-s", false); err != nil {
		t.Errorf("an admin resets alice's session on her subject: %v", err)
	}
}

// A schedule a named client adds is its own, and its ticks run as its
// requests, on a server with authorization (every role within its
// grants): bob neither lists nor pauses it, nor does the shared client
// role remove it; alice does.
func TestANamedClientsScheduleIsItsOwn(t *testing.T) {
	n := startAuthNodeWith(t, "alice", "bob")
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, alice := dialClient(t, ctx, n, "alice")
	_, bob := dialClient(t, ctx, n, "bob")
	shared, err := n.DialAs(ctx, bus.RoleClient, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close()

	tick := []byte(`{"kind":"plan","plan":{"tools":[{"toolId":"a","skill":"echo","input":{"n":1}}]}}`)
	if _, err := alice.AddSchedule(ctx, planbus.ScheduleSpec{Name: "alices", Cron: "@every 1s", Request: tick}); err != nil {
		t.Fatal(err)
	}
	var last string
	bustest.Eventually(t, wait, "a tick of alice's schedule", func() (bool, string) {
		list, err := alice.Schedules(ctx)
		if err != nil || len(list) != 1 {
			return false, fmt.Sprintf("%+v, %v", list, err)
		}
		last = list[0].LastRequestID
		return last != "", "no tick yet"
	})
	out, err := alice.Await(ctx, last)
	if err != nil || !out.Success {
		t.Fatalf("the tick's request %s: %+v, %v", last, out, err)
	}
	_, err = bob.Cancel(ctx, last, "")
	wantForbidden(t, "bob cancels a request of alice's schedule", err, "alice")

	if list, err := bob.Schedules(ctx); err != nil || len(list) != 0 {
		t.Errorf("bob lists %+v, %v; want none of alice's", list, err)
	}
	_, err = bob.PauseSchedule(ctx, "alices")
	wantForbidden(t, "bob pauses alice's schedule", err, "alice")
	_, err = newClient(t, shared).RemoveSchedule(ctx, "alices")
	wantForbidden(t, "the shared client role removes alice's schedule", err, "alice")
	if _, err := alice.RemoveSchedule(ctx, "alices"); err != nil {
		t.Errorf("alice removes her schedule: %v", err)
	}
}
