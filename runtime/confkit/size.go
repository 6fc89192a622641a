package confkit

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Size is a byte count, written in configuration as a number with an
// optional unit: 8MiB, 10MB, 512KiB, 4096 or 4096B.
type Size int64

// Units of Size.
const (
	Byte Size = 1
	KB   Size = 1000
	MB   Size = 1000 * KB
	GB   Size = 1000 * MB
	TB   Size = 1000 * GB
	KiB  Size = 1 << 10
	MiB  Size = 1 << 20
	GiB  Size = 1 << 30
	TiB  Size = 1 << 40
)

var sizeUnits = map[string]Size{
	"":    Byte,
	"b":   Byte,
	"kb":  KB,
	"mb":  MB,
	"gb":  GB,
	"tb":  TB,
	"kib": KiB,
	"mib": MiB,
	"gib": GiB,
	"tib": TiB,
}

// sizeNames lists the units String may use, binary first so that a tie in
// length prefers the binary form.
var sizeNames = []struct {
	name string
	unit Size
}{
	{"TiB", TiB}, {"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB},
	{"TB", TB}, {"GB", GB}, {"MB", MB}, {"KB", KB},
}

// ParseSize parses a byte count: a non-negative number followed by an
// optional unit, B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB
// (powers of 1024). Units are case-insensitive and may be separated from the
// number by spaces. A fraction is accepted when it comes to whole bytes
// (1.5KiB is 1536 bytes).
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, errors.New(`empty size: use a number with an optional unit such as 8MiB, 10MB or 4096`)
	}
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.' || t[i] == '-' || t[i] == '+') {
		i++
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	if strings.HasPrefix(num, "-") {
		return 0, fmt.Errorf("invalid size %q: must not be negative", s)
	}
	num = strings.TrimPrefix(num, "+")
	mult, ok := unitOf(unit)
	if !ok {
		return 0, fmt.Errorf("invalid size %q: unknown unit %q, use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB", s, unit)
	}
	if num == "" || strings.Count(num, ".") > 1 || strings.ContainsAny(num, "+-") || num == "." {
		return 0, fmt.Errorf("invalid size %q: use a number with an optional unit such as 8MiB, 10MB or 4096", s)
	}
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n > math.MaxInt64/int64(mult) {
			return 0, fmt.Errorf("invalid size %q: too large, the limit is %d bytes", s, int64(math.MaxInt64))
		}
		return Size(n) * mult, nil
	}
	if len(num) > 64 {
		return 0, fmt.Errorf("invalid size %q: too many digits", s)
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("invalid size %q: use a number with an optional unit such as 8MiB, 10MB or 4096", s)
	}
	r.Mul(r, new(big.Rat).SetInt64(int64(mult)))
	if !r.IsInt() {
		return 0, fmt.Errorf("invalid size %q: does not come to a whole number of bytes", s)
	}
	if !r.Num().IsInt64() {
		return 0, fmt.Errorf("invalid size %q: too large, the limit is %d bytes", s, int64(math.MaxInt64))
	}
	return Size(r.Num().Int64()), nil
}

// unitOf looks unit up in sizeUnits whatever its case, without allocating
// for the short ASCII units sizes are written with.
func unitOf(unit string) (Size, bool) {
	var buf [3]byte // "kib", the longest unit
	n := 0
	for ; n < len(unit) && n < len(buf) && unit[n] < utf8.RuneSelf; n++ {
		c := unit[n]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[n] = c
	}
	if n < len(unit) { // longer than any unit, or not ASCII
		mult, ok := sizeUnits[strings.ToLower(unit)]
		return mult, ok
	}
	mult, ok := sizeUnits[string(buf[:n])]
	return mult, ok
}

// Bytes returns the size as a number of bytes.
func (s Size) Bytes() int64 { return int64(s) }

// String returns the shortest exact form of the size: 8MiB, 10MB, 1536B.
// A tie prefers the binary unit.
func (s Size) String() string {
	if s < 0 {
		return strconv.FormatInt(int64(s), 10) + "B"
	}
	best := strconv.FormatInt(int64(s), 10) + "B"
	if s == 0 {
		return best
	}
	for _, u := range sizeNames {
		if s%u.unit == 0 {
			c := strconv.FormatInt(int64(s/u.unit), 10) + u.name
			if len(c) < len(best) {
				best = c
			}
		}
	}
	return best
}

// MarshalText writes the size as String does.
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses the size with ParseSize.
func (s *Size) UnmarshalText(b []byte) error {
	v, err := ParseSize(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}
