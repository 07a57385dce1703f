package cli

import "testing"

func TestSizeFlag(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"256MiB", 256 << 20, true},
		{"256 MiB", 256 << 20, true},
		{"1GiB", 1 << 30, true},
		{"64MB", 64_000_000, true},
		{"1048576", 1 << 20, true},
		{"1.5GiB", 3 << 29, true},
		{"", 0, false},
		{"-1", 0, false},
		{"lots", 0, false},
		{"2PiB", 0, false},
		{"99999999999999999999GiB", 0, false},
	} {
		var v sizeValue
		err := v.Set(tt.in)
		if (err == nil) != tt.ok || (tt.ok && int64(v) != tt.want) {
			t.Errorf("Set(%q) = %d, %v; want %d, ok %v", tt.in, v, err, tt.want, tt.ok)
		}
	}
}

// FuzzSizeFlag: any text is either a size within bounds or an error
// naming it, never a panic or a negative size.
func FuzzSizeFlag(f *testing.F) {
	for _, s := range []string{"256MiB", "1 GiB", "64MB", "0", "1e3", "-5", "9999999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var v sizeValue
		if err := v.Set(s); err == nil && (v < 0 || v > maxSize) {
			t.Errorf("Set(%q) = %d, out of bounds", s, v)
		}
	})
}
