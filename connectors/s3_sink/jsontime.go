package s3sink

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// JSON times and numbers as the Parquet columns read them (parquet_row.go)
// and as {field:PATH:day} and {field:PATH:hour} cut directories by them
// (keys.go): one reader, so a file's directory has the day of the value
// its column holds.

// isNumberStart reports whether raw starts a JSON number.
func isNumberStart(raw []byte) bool {
	return len(raw) > 0 && (raw[0] == '-' || isDigit(raw[0]))
}

// isDigit reports whether b is an ASCII digit.
func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// timeForm is how a timestamp or date column's value is written: an
// integer within bits, or a string of layout (form and what name it in
// messages, example is one).
type timeForm struct {
	bits                int
	layout              string
	form, what, example string
}

var (
	timestampForm = timeForm{64, time.RFC3339Nano, "an RFC 3339", "an RFC 3339 time", "2026-09-03T21:15:04.118Z"}
	dateForm      = timeForm{32, time.DateOnly, "a YYYY-MM-DD", "a date", "2026-09-03"}
)

// timeOf reads raw in form f: the integer n, or the time t (isTime).
func timeOf(raw []byte, f timeForm) (n int64, t time.Time, isTime bool, err error) {
	if isNumberStart(raw) {
		n, err := strconv.ParseInt(string(raw), 10, f.bits)
		if err != nil {
			return 0, t, false, fmt.Errorf("not an integer within int%d", f.bits)
		}
		return n, t, false, nil
	}
	s, err := jsonText(raw)
	if err != nil {
		return 0, t, false, fmt.Errorf("neither %s string nor an integer", f.form)
	}
	if t, err = time.Parse(f.layout, s); err != nil {
		return 0, t, false, fmt.Errorf("not %s such as %s", f.what, f.example)
	}
	return 0, t, true, nil
}

// jsonTimestamp reads an RFC 3339 string or an integer of the column's unit.
func jsonTimestamp(raw []byte, micros bool) (int64, error) {
	n, t, isTime, err := timeOf(raw, timestampForm)
	switch {
	case err != nil || !isTime:
		return n, err
	case micros:
		return t.UnixMicro(), nil
	}
	return t.UnixMilli(), nil
}

// jsonDate reads a YYYY-MM-DD string or an integer of days since 1970-01-01.
func jsonDate(raw []byte) (int64, error) {
	n, t, isTime, err := timeOf(raw, dateForm)
	if err != nil || !isTime {
		return n, err
	}
	days := t.Unix() / 86400
	if days < math.MinInt32 || days > math.MaxInt32 {
		return 0, fmt.Errorf("out of the range of a date")
	}
	return days, nil
}

// jsonText returns a JSON string's text, unescaped.
func jsonText(raw []byte) (string, error) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", fmt.Errorf("not a string")
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), nil
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}
