package s3sink

import "testing"

// TestTimeValues: timestamp and date columns take an integer of their unit
// or a string (RFC 3339, YYYY-MM-DD), and refuse anything else with a
// message that names the form they take.
func TestTimeValues(t *testing.T) {
	cases := []struct {
		col  string // ms, us or date
		in   string
		want int64
		err  string
	}{
		{"ms", "1788556504118", 1788556504118, ""},
		{"ms", `"2026-09-03T21:15:04.118Z"`, 1788470104118, ""},
		{"us", `"2026-09-03T21:15:04.118Z"`, 1788470104118000, ""},
		{"us", "-5", -5, ""},
		{"ms", "99999999999999999999", 0, "not an integer within int64"},
		{"ms", "true", 0, "neither an RFC 3339 string nor an integer"},
		{"ms", `"yesterday"`, 0, "not an RFC 3339 time such as 2026-09-03T21:15:04.118Z"},
		{"date", "20699", 20699, ""},
		{"date", `"2026-09-03"`, 20699, ""},
		{"date", `"1969-12-31"`, -1, ""},
		{"date", "4294967296", 0, "not an integer within int32"},
		{"date", "{}", 0, "neither a YYYY-MM-DD string nor an integer"},
		{"date", `"03/09/2026"`, 0, "not a date such as 2026-09-03"},
	}
	for _, c := range cases {
		var got int64
		var err error
		switch c.col {
		case "date":
			got, err = jsonDate([]byte(c.in))
		default:
			got, err = jsonTimestamp([]byte(c.in), c.col == "us")
		}
		switch {
		case c.err != "" && (err == nil || err.Error() != c.err):
			t.Errorf("%s %s: err %v, want %s", c.col, c.in, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%s %s = %d, %v; want %d", c.col, c.in, got, err, c.want)
		}
	}
}
