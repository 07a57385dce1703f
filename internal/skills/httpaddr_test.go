package skills

import (
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"
)

func TestClassifyAddr(t *testing.T) {
	tests := []struct {
		addr  string
		level addrLevel
		what  string // part of the description; empty for public
	}{
		{"8.8.8.8", addrPublic, ""},
		{"1.1.1.1", addrPublic, ""},
		{"2606:4700:4700::1111", addrPublic, ""},
		{"127.0.0.1", addrPrivate, "loopback"},
		{"127.255.255.254", addrPrivate, "loopback"},
		{"::1", addrPrivate, "loopback"},
		{"10.0.0.1", addrPrivate, "RFC 1918"},
		{"172.31.255.255", addrPrivate, "RFC 1918"},
		{"172.32.0.1", addrPublic, ""},
		{"192.168.0.1", addrPrivate, "RFC 1918"},
		{"100.64.0.1", addrPrivate, "CGNAT"},
		{"100.127.255.255", addrPrivate, "CGNAT"},
		{"100.128.0.1", addrPublic, ""},
		{"192.0.0.170", addrPrivate, "special-purpose"},
		{"198.18.0.1", addrPrivate, "special-purpose"},
		{"169.254.169.254", addrLinkLocal, "link-local"},
		{"169.254.0.1", addrLinkLocal, "link-local"},
		{"fe80::1", addrLinkLocal, "link-local"},
		{"fe80::1%eth0", addrLinkLocal, "link-local"},
		{"febf::1", addrLinkLocal, "link-local"},
		{"fc00::1", addrPrivate, "unique-local"},
		{"fdff::1", addrPrivate, "unique-local"},
		{"fec0::1", addrPrivate, "site-local"},
		{"0.0.0.0", addrNever, "unspecified"},
		{"0.1.2.3", addrNever, "unspecified"},
		{"::", addrNever, "unspecified"},
		{"224.0.0.1", addrNever, "multicast"},
		{"239.255.255.250", addrNever, "multicast"},
		{"ff02::1", addrNever, "multicast"},
		{"255.255.255.255", addrNever, "broadcast"},
		{"240.0.0.1", addrNever, "reserved"},
		{"::ffff:127.0.0.1", addrPrivate, "loopback, as IPv4-mapped IPv6"},
		{"::ffff:169.254.169.254", addrLinkLocal, "link-local, as IPv4-mapped IPv6"},
		{"::ffff:8.8.8.8", addrPublic, ""},
		{"::127.0.0.1", addrNever, "IPv4-compatible"},
		{"64:ff9b::7f00:1", addrPrivate, "loopback, as NAT64 IPv6"},
		{"64:ff9b::808:808", addrPublic, ""},
		{"64:ff9b:1::1", addrPrivate, "local-use NAT64"},
		{"2002:7f00:1::1", addrPrivate, "loopback, as 6to4 IPv6"},
		{"2002:a9fe:a9fe::1", addrLinkLocal, "link-local, as 6to4 IPv6"},
		{"2002:808:808::1", addrPublic, ""},
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", addrPrivate, "loopback, as Teredo IPv6"}, // client 127.0.0.1
		{"2001:0:4136:e378:8000:63bf:f7f7:f7f7", addrPublic, ""},                          // client 8.8.8.8
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			c := classifyAddr(netip.MustParseAddr(tt.addr))
			if c.level != tt.level || !strings.Contains(c.what, tt.what) || (tt.what == "") != (c.what == "") {
				t.Errorf("got level %d %q, want %d containing %q", c.level, c.what, tt.level, tt.what)
			}
		})
	}
}

func TestCheckAddr(t *testing.T) {
	tests := []struct {
		addr                                  string
		byDefault, allowPrivate, privateNamed bool // allowed?
	}{
		{"8.8.8.8", true, true, true},
		{"127.0.0.1", false, true, true},
		{"10.1.1.1", false, true, true},
		{"169.254.169.254", false, false, true},
		{"fe80::1", false, false, true},
		{"0.0.0.0", false, false, false},
		{"224.0.0.1", false, false, false},
	}
	for _, tt := range tests {
		a := netip.MustParseAddr(tt.addr)
		for _, c := range []struct {
			private, named, want bool
		}{{false, false, tt.byDefault}, {false, true, tt.byDefault}, {true, false, tt.allowPrivate}, {true, true, tt.privateNamed}} {
			err := checkAddr(a, c.private, c.named)
			if (err == nil) != c.want {
				t.Errorf("%s with allowPrivate %v, named %v: got %v, want allowed %v", tt.addr, c.private, c.named, err, c.want)
			}
			var re *addrRefusedError
			if err != nil && !errors.As(err, &re) {
				t.Errorf("%s: got %T, want *addrRefusedError", tt.addr, err)
			}
		}
	}
}

// TestJSONPrefix checks jsonPrefix against encoding/json: the prefix it
// picks encodes within room, and one more character would not.
func TestJSONPrefix(t *testing.T) {
	alphabet := []byte("ab\"\\\n\t\b\f\x01\x1f\x7f<&>é\xff\xc3")
	alphabet = append(alphabet, "\u2028\u2029€𝄞"...)
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.SliceOf(rapid.SampledFrom(alphabet)).Draw(t, "body")
		room := rapid.IntRange(0, 3*len(b)+2).Draw(t, "room")
		n := jsonPrefix(b, room)
		enc := func(p []byte) int {
			out, err := marshalPlain(string(p))
			if err != nil {
				t.Fatal(err)
			}
			return len(out) - 2
		}
		if got := enc(b[:n]); got > room {
			t.Fatalf("prefix of %d bytes encodes to %d, more than room %d", n, got, room)
		}
		if n < len(b) {
			next := len(b)
			for _, i := range charStarts(b) {
				if i > n {
					next = i
					break
				}
			}
			if got := enc(b[:next]); got <= room {
				t.Fatalf("prefix of %d bytes stops early: %d bytes encode to %d, within room %d", n, next, got, room)
			}
		}
	})
}

// charStarts returns where each character starts in b, as encoding/json
// reads them: a byte that is not valid UTF-8 is a character of its own.
func charStarts(b []byte) []int {
	var starts []int
	for i := 0; i < len(b); {
		starts = append(starts, i)
		_, size := utf8.DecodeRune(b[i:])
		i += size
	}
	return starts
}

func TestMarshalPlainKeepsHTML(t *testing.T) {
	b, err := marshalPlain(map[string]any{"a": "<&>", "r": json.RawMessage(`{"x": "<"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":"<&>","r":{"x":"<"}}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}
