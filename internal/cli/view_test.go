package cli

import (
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/web"
)

// The tests run the commands in-process with the web view, as
// cmd/planner does.
func init() {
	NewView = func(nc *nats.Conn, o ViewOptions, log zerolog.Logger) (ViewHandler, error) {
		s, err := web.New(nc, web.Config{Version: o.Version, Token: o.Token, AnyHost: o.AnyHost}, log)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
}
