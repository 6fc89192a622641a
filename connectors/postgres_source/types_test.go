package postgressource

import (
	"encoding/json"
	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"strings"
	"testing"
)

// typeTable creates a table with one column per type and inserts one row
// of interesting values and one row of NULLs.
const typeTable = `
CREATE TYPE mood AS ENUM ('sad', 'happy');
CREATE DOMAIN posint AS integer CHECK (VALUE > 0);
CREATE TABLE types (
  id serial PRIMARY KEY,
  c_bool boolean, c_int2 smallint, c_int4 integer, c_int8 bigint,
  c_float4 real, c_float8 double precision, c_float_nan double precision,
  c_numeric numeric, c_numeric_big numeric(40,10), c_numeric_nan numeric,
  c_text text, c_varchar varchar(20), c_char char(3), c_uuid uuid,
  c_bytea bytea, c_json json, c_jsonb jsonb,
  c_ts timestamp, c_tstz timestamptz, c_date date, c_time time, c_interval interval,
  c_int_arr int[], c_text_arr text[], c_2d int[][], c_num_arr numeric[], c_ts_arr timestamptz[],
  c_jsonb_arr jsonb[], c_bytea_arr bytea[], c_enum mood, c_enum_arr mood[], c_domain posint,
  c_inet inet, c_money money, c_tstz_inf timestamptz
);
INSERT INTO types (c_bool, c_int2, c_int4, c_int8, c_float4, c_float8, c_float_nan, c_numeric, c_numeric_big, c_numeric_nan,
  c_text, c_varchar, c_char, c_uuid, c_bytea, c_json, c_jsonb, c_ts, c_tstz, c_date, c_time, c_interval,
  c_int_arr, c_text_arr, c_2d, c_num_arr, c_ts_arr, c_jsonb_arr, c_bytea_arr, c_enum, c_enum_arr, c_domain, c_inet, c_money, c_tstz_inf)
VALUES (true, -32768, 2147483647, 9223372036854775807, 1.5, 0.1, 'NaN', 12345678901234567890.123456789, 1.5, 'NaN',
  E'quote " backslash \\ tab \t newline \n é 😀', 'vc', 'ab', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
  '\x00ff10', '{"a": [1, 2.50, null]}', '{"b": {"c": true}}',
  '2024-02-29 13:14:15.123456', '2024-02-29 13:14:15.5+02', '2024-02-29', '13:14:15', '1 day 2 hours',
  '{1,2,NULL}', '{"a b","c\"d",NULL,"NULL",""}', '{{1,2},{3,4}}', '{1.10,NaN}', '{"2024-01-01 00:00:00+00"}',
  ARRAY['{"x":1}'::jsonb], ARRAY['\x01'::bytea], 'happy', '{sad,happy}', 7, '10.0.0.1/8', 12.34, 'infinity');
INSERT INTO types DEFAULT VALUES;
`

// wantTypes is the expected JSON of each column of the first row.
var wantTypes = map[string]string{
	"id":            `1`,
	"c_bool":        `true`,
	"c_int2":        `-32768`,
	"c_int4":        `2147483647`,
	"c_int8":        `9223372036854775807`,
	"c_float4":      `1.5`,
	"c_float8":      `0.1`,
	"c_float_nan":   `"NaN"`,
	"c_numeric":     `12345678901234567890.123456789`,
	"c_numeric_big": `1.5000000000`,
	"c_numeric_nan": `"NaN"`,
	"c_text":        `"quote \" backslash \\ tab \t newline \n é 😀"`,
	"c_varchar":     `"vc"`,
	"c_char":        `"ab "`,
	"c_uuid":        `"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"`,
	"c_bytea":       `"AP8Q"`,
	"c_json":        `{"a": [1, 2.50, null]}`,
	"c_jsonb":       `{"b": {"c": true}}`,
	"c_ts":          `"2024-02-29T13:14:15.123456Z"`,
	"c_tstz":        `"2024-02-29T11:14:15.5Z"`,
	"c_date":        `"2024-02-29"`,
	"c_time":        `"13:14:15"`,
	"c_interval":    `"P1DT2H"`,
	"c_int_arr":     `[1,2,null]`,
	"c_text_arr":    `["a b","c\"d",null,"NULL",""]`,
	"c_2d":          `[[1,2],[3,4]]`,
	"c_num_arr":     `[1.10,"NaN"]`,
	"c_ts_arr":      `["2024-01-01T00:00:00Z"]`,
	"c_jsonb_arr":   `[{"x": 1}]`,
	"c_bytea_arr":   `["AQ=="]`,
	"c_enum":        `"happy"`,
	"c_enum_arr":    `["sad","happy"]`,
	"c_domain":      `7`,
	"c_inet":        `"10.0.0.1/8"`,
	"c_money":       `"$12.34"`,
	"c_tstz_inf":    `"infinity"`,
}

func checkTypes(t *testing.T, payload []byte, nulls bool) {
	t.Helper()
	var got map[string]json.RawMessage
	if err := json.Unmarshal(payload, &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, payload)
	}
	for col, want := range wantTypes {
		if nulls {
			if col == "id" {
				continue
			}
			want = "null"
		}
		if g, ok := got[col]; !ok {
			t.Errorf("%s missing from %s", col, payload)
		} else if string(g) != want {
			t.Errorf("%s = %s, want %s", col, g, want)
		}
	}
}

func TestTypesCDC(t *testing.T) {
	db := newDB(t)
	create, insert, _ := strings.Cut(typeTable, "INSERT")
	db.exec(create)
	s := open(t, db.cdcOptions("types"), nil)
	db.exec("INSERT" + insert)
	b := next(t, s)
	if len(b.Messages) != 2 {
		t.Fatalf("got %d records", len(b.Messages))
	}
	checkTypes(t, b.Messages[0].Payload, false)
	checkTypes(t, b.Messages[1].Payload, true)
	if got := string(b.Messages[0].Key); got != `{"id":1}` {
		t.Errorf("key = %s", got)
	}
}

func TestTypesPolling(t *testing.T) {
	db := newDB(t)
	db.exec(typeTable)
	s := open(t, db.pollOptions("public.types"), nil)
	b := next(t, s)
	if len(b.Messages) != 2 {
		t.Fatalf("got %d records", len(b.Messages))
	}
	checkTypes(t, b.Messages[0].Payload, false)
	checkTypes(t, b.Messages[1].Payload, true)
}

func TestTypesSnapshot(t *testing.T) {
	db := newDB(t)
	db.exec(typeTable)
	opt := db.cdcOptions("types")
	opt.Snapshot = "initial"
	s := open(t, opt, nil)
	b := next(t, s)
	if len(b.Messages) != 2 {
		t.Fatalf("got %d records", len(b.Messages))
	}
	checkTypes(t, b.Messages[0].Payload, false)
	if !strings.Contains(string(b.Messages[0].Payload), `"__op":"read"`) {
		t.Errorf("snapshot record without __op read: %s", b.Messages[0].Payload)
	}
}

func TestNumericAsString(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE n (id int PRIMARY KEY, v numeric); INSERT INTO n VALUES (1, 0.1000)`)
	opt := db.pollOptions("n")
	opt.NumericFormat = postgressourceconfig.NumericFormatString
	s := open(t, opt, nil)
	b := next(t, s)
	if got := string(b.Messages[0].Payload); got != `{"id":1,"v":"0.1000","__op":"read"}` {
		t.Errorf("payload = %s", got)
	}
}
