package s3sink

import (
	"math/big"
	"runtime"
	"strings"
	"testing"
)

// TestDecimalValues: plain, signed, exponent and quoted forms convert to
// the unscaled integer; values with too many digits on either side of the
// point, and text that is not a decimal number, are refused with a message
// that says why.
func TestDecimalValues(t *testing.T) {
	narrow := &pqColumn{typ: colDecimal, precision: 6, scale: 2}
	wide := &pqColumn{typ: colDecimal, precision: 38, scale: 3, flba: decimalBytes(38)}
	cases := []struct {
		in   string
		want int64
		err  string
	}{
		{"12.5", 1250, ""},
		{"-12.50", -1250, ""},
		{"+3", 300, ""},
		{`"9999.99"`, 999999, ""},
		{"1.25e2", 12500, ""},
		{"125E-2", 125, ""},
		{"0.000001e6", 100, ""},
		{"100000e-5", 100, ""},
		{"0", 0, ""},
		{"-0.00", 0, ""},
		{"0e999999", 0, ""},
		{"0e-999999", 0, ""},
		{"1.", 100, ""},
		{"1.234", 0, "more than 2 digits after the point"},
		{"12345.6", 0, "more than 6 digits (precision 6, scale 2)"},
		{"1e999999", 0, "more than 6 digits"},
		{"1e99999999999999999999999999", 0, "more than 6 digits"},
		{"-1e-999999", 0, "more than 2 digits after the point"},
		{"1/3", 0, "not a number"},
		{"0x10", 0, "not a number"},
		{"1e", 0, "not a number"},
		{"1.2.3", 0, "not a number"},
		{`"abc"`, 0, "not a number"},
		{"-", 0, "not a number"},
	}
	for _, c := range cases {
		_, got, err := appendDecimal(nil, []byte(c.in), narrow)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%s: %d, %v; want %d", c.in, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %v; want an error with %q", c.in, err, c.err)
		}
	}
	// A wide column: 38 digits, two's complement.
	b, _, err := appendDecimal(nil, []byte("-1234567890123456789012345678901234.567"), wide)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := new(big.Int).SetString("-1234567890123456789012345678901234567", 10)
	got := new(big.Int).SetBytes(b)
	if b[0]&0x80 != 0 {
		got.Sub(got, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	if got.Cmp(want) != 0 {
		t.Fatalf("wide: %v, want %v", got, want)
	}
}

// TestDecimalExponentCost: a huge exponent is refused without building the
// number. Before, 1e999999 built 10^999999 (32 ms and about 1 MB per value);
// now refusing it allocates no more than refusing 1e9.
func TestDecimalExponentCost(t *testing.T) {
	c := &pqColumn{typ: colDecimal, precision: 38, scale: 3, flba: decimalBytes(38)}
	allocated := func(text string) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 10 {
			if _, _, err := appendDecimal(nil, []byte(text), c); err == nil {
				t.Fatalf("%s accepted", text)
			}
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / 10
	}
	for _, text := range []string{"1e999999", "-1e-999999"} {
		if got, base := allocated(text), allocated("1e99"); got > base+1024 {
			t.Errorf("%s: %d bytes per value, 1e99: %d", text, got, base)
		}
	}
}
