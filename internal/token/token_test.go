package token

import (
	"strings"
	"testing"
)

func newKey(t testing.TB) *Key {
	t.Helper()
	k, _, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Fields that could run into each other sign different messages, and so do
// results and cancels.
func TestTokensAreDistinct(t *testing.T) {
	k := newKey(t)
	seen := map[string]string{}
	add := func(what, tok string) {
		t.Helper()
		if len(tok) != Len || strings.Trim(tok, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			t.Errorf("%s: token %q is not %d characters of base64url", what, tok, Len)
		}
		if prev, ok := seen[tok]; ok {
			t.Errorf("%s and %s share a token", what, prev)
		}
		seen[tok] = what
	}
	add("result p/a.b/1", k.Result("p", "a.b", 1))
	add("result p/a/11", k.Result("p", "a", 11))
	add("result p/a1/1", k.Result("p", "a1", 1))
	add("result pa/1/1", k.Result("pa", "1", 1))
	add("result p/a/2", k.Result("p", "a", 2))
	add("result q/a/1", k.Result("q", "a", 1))
	add("result p-/a/1", k.Result("p-", "a", 1))
	add("cancel p", k.Cancel("p"))
	add("cancel q", k.Cancel("q"))
	add("result p/a/1 under another key", newKey(t).Result("p", "a", 1))
	add("result p/a/1", k.Result("p", "a", 1))
	if first, again := k.Result("p", "a", 1), k.Result("p", "a", 1); first != again {
		t.Errorf("the same attempt got two tokens, %s and %s", first, again)
	}
}

func TestCheckResult(t *testing.T) {
	k := newKey(t)
	good := k.Result("p", "a", 1)
	tests := []struct {
		name, tok string
		want      bool
	}{
		{"its own token", good, true},
		{"no token", "", false},
		{"another attempt's", k.Result("p", "a", 2), false},
		{"another tool's", k.Result("p", "b", 1), false},
		{"another plan's", k.Result("q", "a", 1), false},
		{"the plan's cancel token", k.Cancel("p"), false},
		{"under another key", newKey(t).Result("p", "a", 1), false},
		{"one character changed", good[:Len-1] + string(good[Len-1]^1), false},
		{"a prefix", good[:Len-1], false},
		{"with more after", good + "A", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := k.CheckResult("p", "a", 1, tt.tok); got != tt.want {
				t.Errorf("CheckResult(%q) = %v, want %v", tt.tok, got, tt.want)
			}
		})
	}
}

func TestDigest(t *testing.T) {
	k := newKey(t)
	tok := k.Cancel("p")
	d := Digest(tok)
	if len(d) != Len || d == tok || Digest(tok) != d {
		t.Fatalf("digest %q of %q: want %d characters, stable, unlike the token", d, tok, Len)
	}
	for _, other := range []string{k.Cancel("q"), d, "", newKey(t).Cancel("p")} {
		if Digest(other) == d {
			t.Errorf("the digest of %q is the plan's", other)
		}
	}
}

func TestMsgID(t *testing.T) {
	k := newKey(t)
	a, b := k.Result("p", "a", 1), k.Result("p", "a", 2)
	id := MsgID("p/a/1", a)
	if !strings.HasPrefix(id, "p/a/1/") || len(id) != len("p/a/1/")+16 {
		t.Errorf("MsgID %q, want p/a/1/ and a 16-character tag", id)
	}
	if MsgID("p/a/1", a) != id {
		t.Errorf("two ids for one attempt")
	}
	if MsgID("p/a/1", b) == id || strings.Contains(id, a) {
		t.Errorf("id %q does not depend on the token, or shows it", id)
	}
}

func TestKeysFromBytesAndText(t *testing.T) {
	k, raw, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Decode(Encode(raw))
	if err != nil || again.Result("p", "a", 1) != k.Result("p", "a", 1) {
		t.Fatalf("decoded key differs (err %v)", err)
	}
	for _, bad := range []string{"", "short", strings.Repeat("A", 42), strings.Repeat("A", 44), strings.Repeat("+", 43)} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%q) accepted it", bad)
		}
	}
}

func FuzzDecode(f *testing.F) {
	_, raw, err := NewKey()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(Encode(raw))
	f.Add([]byte("not a key"))
	f.Fuzz(func(t *testing.T, text []byte) {
		k, err := Decode(text)
		if err != nil {
			return
		}
		if len(k.Result("p", "a", 1)) != Len {
			t.Fatalf("a decoded key signs tokens of the wrong length")
		}
	})
}

func BenchmarkResult(b *testing.B) {
	k := newKey(b)
	for b.Loop() {
		k.Result("a-plan-id-of-some-length", "tool-17", 1)
	}
}

func BenchmarkCheckResult(b *testing.B) {
	k := newKey(b)
	tok := k.Result("a-plan-id-of-some-length", "tool-17", 1)
	for b.Loop() {
		if !k.CheckResult("a-plan-id-of-some-length", "tool-17", 1, tok) {
			b.Fatal("check failed")
		}
	}
}
