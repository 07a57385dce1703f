package generator

import (
	"fmt"
	"testing"
)

// A domain is decoded once and then served from the cache; the cache
// keeps at most domainCacheSize domains, dropping the least recently
// used.
func TestDomainCache(t *testing.T) {
	c := newDomainCache()
	doc := func(i int) []byte {
		return []byte(fmt.Sprintf(`{"name":"d%d","facts":{"done":false},
			"actions":[{"name":"do","skill":"echo","effects":{"done":true},"cost":1}],
			"goals":[{"name":"g","utility":1,"conditions":{"done":true}}]}`, i))
	}
	first, err := c.decode(doc(0))
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.decode(doc(0))
	if err != nil || again != first {
		t.Fatalf("second decode of the same domain: %p (%v), want the cached %p", again, err, first)
	}
	for i := 1; i <= domainCacheSize; i++ {
		if _, err := c.decode(doc(i)); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.by) != domainCacheSize || len(c.order) != domainCacheSize {
		t.Errorf("cache holds %d (%d in order), want %d", len(c.by), len(c.order), domainCacheSize)
	}
	if d, _ := c.decode(doc(0)); d == first {
		t.Error("the least recently used domain was kept past the bound")
	}
	if _, err := c.decode([]byte(`{"actions": 5}`)); err == nil {
		t.Error("a bad domain decoded")
	}
}
