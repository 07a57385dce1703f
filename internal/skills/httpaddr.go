package skills

import (
	"fmt"
	"net/netip"
)

// addrClass says why the http skill treats an address as special: what
// the address is, and whether --http-allow-private can open it.
type addrClass struct {
	// what names the kind of address in errors: "loopback", "private
	// (RFC 1918)", "link-local"...
	what string
	// level is how hard the address is to open.
	level addrLevel
}

type addrLevel int

const (
	// addrPublic is an ordinary address: allowed.
	addrPublic addrLevel = iota
	// addrPrivate is loopback, private, shared or unique-local: opened by
	// AllowPrivate.
	addrPrivate
	// addrLinkLocal is link-local, where cloud metadata services listen:
	// opened by AllowPrivate only together with a host allow-list, so
	// that only named hosts can reach it.
	addrLinkLocal
	// addrNever is unspecified, multicast, broadcast or reserved: no TCP
	// service a tool should call lives there.
	addrNever
)

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// The IPv4 ranges besides those netip.Addr's methods name.
var (
	v4ThisNetwork = prefixes("0.0.0.0/8")
	v4Shared      = prefixes("100.64.0.0/10")
	v4Special     = prefixes("192.0.0.0/24", "198.18.0.0/15")
	v4Reserved    = prefixes("240.0.0.0/4") // with 255.255.255.255, the broadcast address
	v6SiteLocal   = prefixes("fec0::/10")
	v6Compat      = prefixes("::/96") // IPv4-compatible, deprecated
	v6NAT64       = prefixes("64:ff9b::/96")
	v6LocalNAT64  = prefixes("64:ff9b:1::/48")
	v66to4        = prefixes("2002::/16")
	v6Teredo      = prefixes("2001::/32")
)

func inAny(a netip.Addr, ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// classifyAddr says what kind of address a is. IPv4 addresses inside IPv6
// ones (mapped, NAT64, 6to4, Teredo) are judged by the IPv4 address they
// lead to.
func classifyAddr(a netip.Addr) addrClass {
	a = a.WithZone("")
	if a.Is4In6() {
		return embedded(classifyV4(a.Unmap()), "IPv4-mapped")
	}
	if a.Is4() {
		return classifyV4(a)
	}
	switch {
	case !a.IsValid():
		return addrClass{"not an IP address", addrNever}
	case a.IsUnspecified():
		return addrClass{"unspecified", addrNever}
	case a.IsLoopback():
		return addrClass{"loopback", addrPrivate}
	case a.IsMulticast():
		return addrClass{"multicast", addrNever}
	case a.IsLinkLocalUnicast():
		return addrClass{"link-local", addrLinkLocal}
	case a.IsPrivate():
		return addrClass{"unique-local (private)", addrPrivate}
	case inAny(a, v6SiteLocal):
		return addrClass{"site-local (private)", addrPrivate}
	case inAny(a, v6Compat):
		return addrClass{"IPv4-compatible (deprecated)", addrNever}
	case inAny(a, v6LocalNAT64):
		return addrClass{"local-use NAT64", addrPrivate}
	}
	b := a.As16()
	switch {
	case inAny(a, v6NAT64):
		return embedded(classifyV4(netip.AddrFrom4([4]byte(b[12:16]))), "NAT64")
	case inAny(a, v66to4):
		return embedded(classifyV4(netip.AddrFrom4([4]byte(b[2:6]))), "6to4")
	case inAny(a, v6Teredo):
		// The client's address is stored inverted in the last 32 bits.
		client := [4]byte{^b[12], ^b[13], ^b[14], ^b[15]}
		return embedded(classifyV4(netip.AddrFrom4(client)), "Teredo")
	}
	return addrClass{"", addrPublic}
}

func embedded(c addrClass, how string) addrClass {
	if c.level == addrPublic {
		return c
	}
	return addrClass{c.what + ", as " + how + " IPv6", c.level}
}

func classifyV4(a netip.Addr) addrClass {
	switch {
	case inAny(a, v4ThisNetwork):
		return addrClass{"unspecified (0.0.0.0/8)", addrNever}
	case a.IsLoopback():
		return addrClass{"loopback", addrPrivate}
	case a.IsPrivate():
		return addrClass{"private (RFC 1918)", addrPrivate}
	case inAny(a, v4Shared):
		return addrClass{"shared (CGNAT, RFC 6598)", addrPrivate}
	case a.IsLinkLocalUnicast():
		return addrClass{"link-local", addrLinkLocal}
	case inAny(a, v4Special):
		return addrClass{"special-purpose (RFC 6890)", addrPrivate}
	case a.IsMulticast():
		return addrClass{"multicast", addrNever}
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return addrClass{"broadcast", addrNever}
	case inAny(a, v4Reserved):
		return addrClass{"reserved (240.0.0.0/4)", addrNever}
	}
	return addrClass{"", addrPublic}
}

// addrRefusedError is what the http skill's dialer returns for an address
// its policy refuses.
type addrRefusedError struct {
	host  string // as the request named it; empty until the dialer knows
	addr  netip.Addr
	class addrClass
	hint  string // what would allow it
}

func (e *addrRefusedError) Error() string {
	host := ""
	if e.host != "" && e.host != e.addr.String() {
		host = fmt.Sprintf("host %q resolves to ", e.host)
	}
	return fmt.Sprintf("%saddress %s (%s): %s", host, e.addr, e.class.what, e.hint)
}

// checkAddr returns an *addrRefusedError if the policy refuses a.
// allowPrivate opens loopback, private and similar addresses; named (a
// host allow-list is in force) together with allowPrivate opens
// link-local addresses too.
func checkAddr(a netip.Addr, allowPrivate, named bool) error {
	c := classifyAddr(a)
	refuse := func(hint string) error { return &addrRefusedError{addr: a.WithZone(""), class: c, hint: hint} }
	switch c.level {
	case addrPrivate:
		if !allowPrivate {
			return refuse("the http skill refuses it by default; start the worker with --http-allow-private to allow private and loopback addresses")
		}
	case addrLinkLocal:
		switch {
		case !allowPrivate:
			return refuse("the http skill refuses it by default (cloud metadata services live there); start the worker with --http-allow-private and name the host in --http-allow to allow it")
		case !named:
			return refuse("with --http-allow-private alone link-local addresses stay refused (cloud metadata services live there); name the host in --http-allow to allow it")
		}
	case addrNever:
		return refuse("the http skill never connects there")
	}
	return nil
}
