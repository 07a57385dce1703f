package embedded

import (
	"github.com/nats-io/nats-server/v2/server"

	"github.com/planbus/planbus/internal/bus"
)

// Auth turns on authorization in an embedded server: one nkey user per
// role, with the role's permissions, one per worker group and one per
// named client. A
// connection without one of the seeds is refused.
func Auth(s *bus.Seeds) Option {
	return func(o *server.Options) {
		o.Nkeys = nil
		for _, r := range bus.Roles() {
			o.Nkeys = append(o.Nkeys, &server.NkeyUser{Nkey: s.PublicKey(r), Permissions: Permissions(r.Grants())})
		}
		for _, g := range s.Groups() {
			o.Nkeys = append(o.Nkeys, &server.NkeyUser{Nkey: g.PublicKey, Permissions: Permissions(bus.WorkerGrants(g.Skills))})
		}
		for _, c := range s.Clients() {
			o.Nkeys = append(o.Nkeys, &server.NkeyUser{Nkey: c.PublicKey, Permissions: Permissions(bus.ClientGrants(c.Name))})
		}
	}
}

// Permissions are grants in the embedded server's terms.
func Permissions(g bus.Grants) *server.Permissions {
	p := &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: g.Publish},
		Subscribe: &server.SubjectPermission{Allow: g.Subscribe, Deny: g.SubscribeDeny},
	}
	if g.Respond {
		p.Response = &server.ResponsePermission{MaxMsgs: 1, Expires: g.ResponseExpiry}
	}
	return p
}
