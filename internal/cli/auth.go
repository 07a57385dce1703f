package cli

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// ErrExposed is protected mode's refusal.
var ErrExposed = errors.New("not a loopback address")

// CheckExposure is protected mode: an embedded server that listens beyond
// loopback needs --auth, or --insecure to say the exposure is meant. It
// also refuses --auth with --nats-url, where there is no embedded server
// to configure.
func (c *Common) CheckExposure(cmd string) error {
	if c.Bus.URL != "" {
		if c.Auth {
			return fmt.Errorf("%s: --auth configures the embedded server; with --nats-url, connect with a role's seed (--nkey)", cmd)
		}
		return nil
	}
	if c.Auth || c.Insecure {
		return nil
	}
	listen := c.Bus.Defaults().Listen
	host, _, err := net.SplitHostPort(listen)
	if err != nil || Loopback(host) {
		return nil // Validate names a malformed address
	}
	return fmt.Errorf("%s: --listen %s: %w: anyone who can reach it could submit work, forge results and read every secret on the bus. "+
		"Turn on --auth (a role per component, seeds in <data-dir>/auth), or pass --insecure to listen without authentication anyway",
		cmd, listen, ErrExposed)
}

// Loopback reports whether host is only reachable from this machine: a
// loopback IP or "localhost". A name that would have to be resolved is
// not, since it may resolve elsewhere.
func Loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
