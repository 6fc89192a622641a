package confgen

import (
	"math"
	"testing"
)

func TestNormalizeIntegers(t *testing.T) {
	for _, c := range []struct {
		in   any
		want any
	}{
		{int(-7), int64(-7)},
		{int8(-8), int64(-8)},
		{int16(16), int64(16)},
		{int32(-32), int64(-32)},
		{uint(9), int64(9)},
		{uint8(255), int64(255)},
		{uint16(65535), int64(65535)},
		{uint32(math.MaxUint32), int64(math.MaxUint32)},
		{uint64(math.MaxInt64), int64(math.MaxInt64)},
		{uint64(math.MaxUint64), float64(math.MaxUint64)},
		{uint(math.MaxUint64), float64(math.MaxUint64)},
	} {
		if got := Normalize(c.in); got != c.want {
			t.Errorf("Normalize(%T %v) = %T %v, want %T %v", c.in, c.in, got, got, c.want, c.want)
		}
	}
}
