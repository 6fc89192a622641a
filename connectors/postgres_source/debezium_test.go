package postgressource

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"github.com/picomq/pico-connectors/sdk"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

// The golden tests of record_format = "debezium". Records are compared
// byte for byte after the fields that change from run to run are replaced
// by placeholders (dbzNorm); those are checked on their own. The field
// list and order are those of Debezium's PostgreSQL connector: the
// Envelope (before, after, source, transaction, op, ts_ms, ts_us, ts_ns)
// and io.debezium.connector.postgresql.Source (version, connector, name,
// ts_ms, snapshot, db, sequence, ts_us, ts_ns, schema, table, txId, lsn,
// xmin), as its JSON converter writes them with schemas disabled.

func (d *testDB) dbzOptions(tables ...string) postgressourceconfig.Config {
	c := d.cdcOptions(tables...)
	c.RecordFormat = postgressourceconfig.RecordFormatDebezium
	c.LogicalName = "pg1"
	return c
}

var dbzVolatile = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`"version":"[^"]*"`), `"version":"V"`},
	{regexp.MustCompile(`"(ts_ms|ts_us|ts_ns)":\d+`), `"$1":0`},
	{regexp.MustCompile(`"txId":\d+`), `"txId":X`},
	{regexp.MustCompile(`"lsn":\d+`), `"lsn":L`},
	{regexp.MustCompile(`"sequence":"\[[^\]]*\]"`), `"sequence":"S"`},
	{regexp.MustCompile(`"id":"\d+:\d+"`), `"id":"X:L"`},
}

// dbzNorm replaces the fields that change from run to run.
func dbzNorm(p []byte) string {
	s := string(p)
	for _, v := range dbzVolatile {
		s = v.re.ReplaceAllString(s, v.repl)
	}
	return s
}

// dbzSrc is the normalized source block of a change of db's table.
func dbzSrc(db *testDB, table, snapshot string, cdc bool) string {
	seq, tx, lsn := `null`, `null`, `null`
	if cdc {
		seq, tx, lsn = `"S"`, `X`, `L`
	}
	return `"source":{"version":"V","connector":"postgresql","name":"pg1","ts_ms":0,"snapshot":"` + snapshot + `","db":"` + db.tag +
		`","sequence":` + seq + `,"ts_us":0,"ts_ns":0,"schema":"public","table":"` + table + `","txId":` + tx + `,"lsn":` + lsn + `,"xmin":null}`
}

const dbzTail = `,"transaction":%s,"op":"%s","ts_ms":0,"ts_us":0,"ts_ns":0}`

// dbzWant is the normalized record of a read.
func dbzWant(db *testDB, table, op, before, after, snapshot string, cdc bool) string {
	return `{"before":` + before + `,"after":` + after + `,` + dbzSrc(db, table, snapshot, cdc) + fmt.Sprintf(dbzTail, "null", op)
}

// dbzChange is the normalized record of a change, the order-th record of
// its transaction and the tableOrder-th of its table in it.
func dbzChange(db *testDB, table, op, before, after string, order, tableOrder int) string {
	tx := fmt.Sprintf(`{"id":"X:L","total_order":%d,"data_collection_order":%d}`, order, tableOrder)
	return `{"before":` + before + `,"after":` + after + `,` + dbzSrc(db, table, "false", true) + fmt.Sprintf(dbzTail, tx, op)
}

// collect polls until n records arrived, acknowledging each batch.
func collect(t *testing.T, s *Source, n int) []sdk.Message {
	t.Helper()
	var out []sdk.Message
	for len(out) < n {
		b := next(t, s)
		out = append(out, b.Messages...)
		ack(t, s)
	}
	if len(out) != n {
		t.Fatalf("got %d records, want %d:\n%s", len(out), n, strings.Join(payloads(sdk.Batch{Messages: out}), "\n"))
	}
	return out
}

func header(m sdk.Message, key string) string {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// TestDebeziumOperations checks one record of each operation against
// Debezium's documented shape: create, update with the default replica
// identity (before null) and with FULL (before the old row), an update of
// the key (a delete of the old key and a create of the new one, with the
// __debezium.newkey and __debezium.oldkey headers), deletes with either
// identity (the key columns and nulls, or the old row), and a truncate (no
// key); then the volatile fields: txId is the writing transaction's ID, lsn
// the sequence's second element and increasing, the times agree with each
// other and with the clock around the commit.
func TestDebeziumOperations(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE t (id int PRIMARY KEY, name text, n int);
CREATE TABLE f (id int PRIMARY KEY, name text); ALTER TABLE f REPLICA IDENTITY FULL`)
	s := open(t, db.dbzOptions("t", "f"), nil)

	t0 := time.Now().Truncate(time.Millisecond)
	xid := db.value(`WITH ins AS (INSERT INTO t VALUES (1, 'a', 10) RETURNING 1) SELECT txid_current()::text FROM ins`)
	t1 := time.Now()
	db.exec(`UPDATE t SET name = 'b' WHERE id = 1`)
	db.exec(`INSERT INTO f VALUES (1, 'x'); INSERT INTO t VALUES (5, 'z', 0); UPDATE f SET name = 'y' WHERE id = 1`)
	db.exec(`UPDATE t SET id = 2 WHERE id = 1`)
	db.exec(`DELETE FROM t WHERE id = 2`)
	db.exec(`DELETE FROM f`)
	db.exec(`TRUNCATE t`)
	got := collect(t, s, 10)

	want := []struct{ key, value string }{
		{`{"id":1}`, dbzChange(db, "t", "c", `null`, `{"id":1,"name":"a","n":10}`, 1, 1)},
		{`{"id":1}`, dbzChange(db, "t", "u", `null`, `{"id":1,"name":"b","n":10}`, 1, 1)},
		{`{"id":1}`, dbzChange(db, "f", "c", `null`, `{"id":1,"name":"x"}`, 1, 1)},
		{`{"id":5}`, dbzChange(db, "t", "c", `null`, `{"id":5,"name":"z","n":0}`, 2, 1)},
		{`{"id":1}`, dbzChange(db, "f", "u", `{"id":1,"name":"x"}`, `{"id":1,"name":"y"}`, 3, 2)},
		{`{"id":1}`, dbzChange(db, "t", "d", `{"id":1,"name":null,"n":null}`, `null`, 1, 1)},
		{`{"id":2}`, dbzChange(db, "t", "c", `null`, `{"id":2,"name":"b","n":10}`, 2, 2)},
		{`{"id":2}`, dbzChange(db, "t", "d", `{"id":2,"name":null,"n":null}`, `null`, 1, 1)},
		{`{"id":1}`, dbzChange(db, "f", "d", `{"id":1,"name":"y"}`, `null`, 1, 1)},
		{``, `{"before":null,"after":null,` + dbzSrc(db, "t", "false", true) + fmt.Sprintf(dbzTail, `{"id":"X:L","total_order":1,"data_collection_order":1}`, "t")},
	}
	for i, w := range want {
		if g := dbzNorm(got[i].Payload); g != w.value {
			t.Errorf("record %d:\n got %s\nwant %s", i, g, w.value)
		}
		if g := string(got[i].Key); g != w.key {
			t.Errorf("record %d: key %s, want %s", i, g, w.key)
		}
	}
	if h := header(got[5], "__debezium.newkey"); h != `{"id":2}` {
		t.Errorf("the delete of a key change has __debezium.newkey %q, want {\"id\":2}", h)
	}
	if h := header(got[6], "__debezium.oldkey"); h != `{"id":1}` {
		t.Errorf("the create of a key change has __debezium.oldkey %q, want {\"id\":1}", h)
	}
	if len(got[0].Headers) != 0 || len(got[1].Headers) != 0 {
		t.Errorf("plain changes carry headers: %v %v", got[0].Headers, got[1].Headers)
	}

	var first struct {
		Source struct {
			TsMs            int64       `json:"ts_ms"`
			TsUs            int64       `json:"ts_us"`
			TsNs            int64       `json:"ts_ns"`
			TxID            json.Number `json:"txId"`
			LSN             uint64      `json:"lsn"`
			Sequence        string      `json:"sequence"`
			Connector, Name string
			Version         string
		} `json:"source"`
		TsMs        int64 `json:"ts_ms"`
		TsUs        int64 `json:"ts_us"`
		TsNs        int64 `json:"ts_ns"`
		Transaction struct {
			ID string `json:"id"`
		} `json:"transaction"`
	}
	var lastLSN uint64
	for i, m := range got {
		if err := json.Unmarshal(m.Payload, &first); err != nil {
			t.Fatal(err)
		}
		src := first.Source
		var seq []*string
		if err := json.Unmarshal([]byte(src.Sequence), &seq); err != nil || len(seq) != 2 || seq[1] == nil {
			t.Fatalf("record %d: sequence %q is not [last commit, lsn]", i, src.Sequence)
		}
		if *seq[1] != strconv.FormatUint(src.LSN, 10) {
			t.Errorf("record %d: sequence %q does not end with lsn %d", i, src.Sequence, src.LSN)
		}
		if i > 0 && (seq[0] == nil || *seq[0] == "") {
			t.Errorf("record %d: sequence %q has no last commit after a committed transaction", i, src.Sequence)
		}
		if src.LSN < lastLSN {
			t.Errorf("record %d: lsn %d before the previous record's %d", i, src.LSN, lastLSN)
		}
		lastLSN = src.LSN
		if w := src.TxID.String() + ":" + strconv.FormatUint(src.LSN, 10); first.Transaction.ID != w {
			t.Errorf("record %d: transaction.id %q, want txId:lsn %q", i, first.Transaction.ID, w)
		}
		if src.TsUs/1000 != src.TsMs || src.TsNs/1000 != src.TsUs || first.TsUs/1000 != first.TsMs || first.TsNs/1000 != first.TsUs {
			t.Errorf("record %d: ts_ms, ts_us and ts_ns disagree: %s", i, m.Payload)
		}
		if first.TsMs < src.TsMs {
			t.Errorf("record %d: processed (ts_ms %d) before its commit (source.ts_ms %d)", i, first.TsMs, src.TsMs)
		}
		if i == 0 {
			if src.TxID.String() != xid {
				t.Errorf("txId %s, want the writing transaction's %s", src.TxID, xid)
			}
			if src.TsMs < t0.UnixMilli() || src.TsMs > t1.UnixMilli() {
				t.Errorf("source.ts_ms %d is not the commit time, between %d and %d", src.TsMs, t0.UnixMilli(), t1.UnixMilli())
			}
			if src.Version != "pico-connectors "+sdk.Version() {
				t.Errorf("version %q", src.Version)
			}
		}
	}
}

// dbzTypeTable has one column per type the source maps, and the values
// Debezium's documented conversions (decimal.handling.mode = string,
// time.precision.mode = adaptive) are checked against in wantDbzTypes.
const dbzTypeTable = `
CREATE TYPE mood AS ENUM ('sad', 'happy');
CREATE DOMAIN posint AS integer CHECK (VALUE > 0);
CREATE DOMAIN ts3 AS timestamp(3);
CREATE TABLE types (
  id serial PRIMARY KEY,
  c_bool boolean, c_int2 smallint, c_int4 integer, c_int8 bigint, c_oid oid,
  c_float4 real, c_float8 double precision, c_float_nan double precision, c_float_inf double precision,
  c_numeric numeric, c_numeric_big numeric(40,10), c_numeric_nan numeric, c_money money, c_money_neg money,
  c_text text, c_varchar varchar(20), c_char char(3), c_uuid uuid,
  c_bytea bytea, c_json json, c_jsonb jsonb,
  c_ts timestamp, c_ts3 timestamp(3), c_ts_neg timestamp(3), c_ts_inf timestamp, c_ts_domain ts3,
  c_tstz timestamptz, c_tstz3 timestamptz(3), c_tstz0 timestamptz(0), c_tstz_inf timestamptz,
  c_date date, c_date_old date, c_time time, c_time3 time(3), c_timetz timetz, c_timetz_wrap timetz,
  c_interval interval, c_interval_neg interval,
  c_bit1 bit(1), c_bit8 bit(8), c_varbit varbit, c_point point,
  c_int_arr int[], c_text_arr text[], c_2d int[][], c_num_arr numeric[], c_ts_arr timestamptz[],
  c_jsonb_arr jsonb[], c_bytea_arr bytea[], c_enum mood, c_enum_arr mood[], c_domain posint,
  c_inet inet, c_range int4range
);
INSERT INTO types (c_bool, c_int2, c_int4, c_int8, c_oid, c_float4, c_float8, c_float_nan, c_float_inf,
  c_numeric, c_numeric_big, c_numeric_nan, c_money, c_money_neg, c_text, c_varchar, c_char, c_uuid, c_bytea, c_json, c_jsonb,
  c_ts, c_ts3, c_ts_neg, c_ts_inf, c_ts_domain, c_tstz, c_tstz3, c_tstz0, c_tstz_inf,
  c_date, c_date_old, c_time, c_time3, c_timetz, c_timetz_wrap, c_interval, c_interval_neg,
  c_bit1, c_bit8, c_varbit, c_point,
  c_int_arr, c_text_arr, c_2d, c_num_arr, c_ts_arr, c_jsonb_arr, c_bytea_arr, c_enum, c_enum_arr, c_domain, c_inet, c_range)
VALUES (true, -32768, 2147483647, 9223372036854775807, 4000000000, 1.5, 0.1, 'NaN', '-Infinity',
  12345678901234567890.123456789, 1.5, 'NaN', 12.34, -1234.5,
  E'quote " backslash \\ tab \t newline \n é 😀', 'vc', 'ab', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
  '\x00ff10', '{"a": [1, 2.50, null]}', '{"b": {"c": true}}',
  '2024-02-29 13:14:15.123456', '2024-02-29 13:14:15.123', '1969-12-31 23:59:59.5', 'infinity', '2024-02-29 13:14:15.123',
  '2024-02-29 13:14:15.5+02', '2024-02-29 13:14:15.5+02', '2024-02-29 13:14:15+02', 'infinity',
  '2024-02-29', '1900-01-01', '13:14:15.5', '13:14:15.5', '13:14:15.5+02', '01:00:00+02',
  '1 year 2 months 3 days 4 hours 5 minutes 6.5 seconds', '-1 year -2 hours',
  B'1', B'10100101', B'1011000011', '(1.5,-2)',
  '{1,2,NULL}', '{"a b","c\"d",NULL,"NULL",""}', '{{1,2},{3,4}}', '{1.10,NaN}', '{"2024-01-01 00:00:00+00"}',
  ARRAY['{"x":1}'::jsonb], ARRAY['\x01'::bytea], 'happy', '{sad,happy}', 7, '10.0.0.1/8', '[1,5)');
INSERT INTO types DEFAULT VALUES;
`

// wantDbzTypes is the Debezium JSON of each column of the first row.
var wantDbzTypes = map[string]string{
	"id":             `1`,
	"c_bool":         `true`,
	"c_int2":         `-32768`,
	"c_int4":         `2147483647`,
	"c_int8":         `9223372036854775807`,
	"c_oid":          `4000000000`,
	"c_float4":       `1.5`,
	"c_float8":       `0.1`,
	"c_float_nan":    `"NaN"`,
	"c_float_inf":    `"-Infinity"`,
	"c_numeric":      `"12345678901234567890.123456789"`,
	"c_numeric_big":  `"1.5000000000"`,
	"c_numeric_nan":  `"NAN"`,
	"c_money":        `"12.34"`,
	"c_money_neg":    `"-1234.50"`,
	"c_text":         `"quote \" backslash \\ tab \t newline \n é 😀"`,
	"c_varchar":      `"vc"`,
	"c_char":         `"ab "`,
	"c_uuid":         `"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"`,
	"c_bytea":        `"AP8Q"`,
	"c_json":         `"{\"a\": [1, 2.50, null]}"`,
	"c_jsonb":        `"{\"b\": {\"c\": true}}"`,
	"c_ts":           `1709212455123456`,
	"c_ts3":          `1709212455123`,
	"c_ts_neg":       `-500`,
	"c_ts_inf":       `9223372036825200000`,
	"c_ts_domain":    `1709212455123`,
	"c_tstz":         `"2024-02-29T11:14:15.500000Z"`,
	"c_tstz3":        `"2024-02-29T11:14:15.500Z"`,
	"c_tstz0":        `"2024-02-29T11:14:15Z"`,
	"c_tstz_inf":     `"infinity"`,
	"c_date":         `19782`,
	"c_date_old":     `-25567`,
	"c_time":         `47655500000`,
	"c_time3":        `47655500`,
	"c_timetz":       `"11:14:15.5Z"`,
	"c_timetz_wrap":  `"23:00:00Z"`,
	"c_interval":     `37091106500000`,
	"c_interval_neg": `-31564800000000`,
	"c_bit1":         `true`,
	"c_bit8":         `"pQ=="`,
	"c_varbit":       `"wwI="`,
	"c_point":        `{"x":1.5,"y":-2,"wkb":"AQEAAAAAAAAAAAD4PwAAAAAAAADA","srid":null}`,
	"c_int_arr":      `[1,2,null]`,
	"c_text_arr":     `["a b","c\"d",null,"NULL",""]`,
	"c_2d":           `[[1,2],[3,4]]`,
	"c_num_arr":      `["1.10","NAN"]`,
	"c_ts_arr":       `["2024-01-01T00:00:00.000000Z"]`,
	"c_jsonb_arr":    `["{\"x\": 1}"]`,
	"c_bytea_arr":    `["AQ=="]`,
	"c_enum":         `"happy"`,
	"c_enum_arr":     `["sad","happy"]`,
	"c_domain":       `7`,
	"c_inet":         `"10.0.0.1/8"`,
	"c_range":        `"[1,5)"`,
}

// checkDbzTypes compares the after of a record with wantDbzTypes, or with
// null for every column but id.
func checkDbzTypes(t *testing.T, payload []byte, nulls bool) {
	t.Helper()
	var env struct {
		After map[string]json.RawMessage `json:"after"`
	}
	if err := json.Unmarshal(payload, &env); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, payload)
	}
	if len(env.After) != len(wantDbzTypes) {
		t.Errorf("after has %d columns, want %d: %s", len(env.After), len(wantDbzTypes), payload)
	}
	for col, want := range wantDbzTypes {
		if nulls && col != "id" {
			want = "null"
		}
		if nulls && col == "id" {
			want = "2"
		}
		if g, ok := env.After[col]; !ok {
			t.Errorf("%s missing from %s", col, payload)
		} else if string(g) != want {
			t.Errorf("%s = %s, want %s", col, g, want)
		}
	}
}

// TestDebeziumTypes checks every type's value in CDC (pgoutput's text
// form), in the initial snapshot and in polling (a query's text form).
func TestDebeziumTypes(t *testing.T) {
	for _, how := range []string{"cdc", "snapshot", "polling"} {
		t.Run(how, func(t *testing.T) {
			db := newDB(t)
			create, insert, _ := strings.Cut(dbzTypeTable, "INSERT")
			db.exec(create)
			opt := db.dbzOptions("types")
			op := "r"
			switch how {
			case "cdc":
				op = "c"
			case "snapshot":
				opt.Snapshot = "initial"
				db.exec("INSERT" + insert)
			case "polling":
				opt.Mode = postgressourceconfig.ModePolling
				db.exec("INSERT" + insert)
			}
			s := open(t, opt, nil)
			if how == "cdc" {
				db.exec("INSERT" + insert)
			}
			got := collect(t, s, 2)
			checkDbzTypes(t, got[0].Payload, false)
			checkDbzTypes(t, got[1].Payload, true)
			if k := string(got[0].Key); k != `{"id":1}` {
				t.Errorf("key %s", k)
			}
			var env map[string]any
			if err := json.Unmarshal(got[0].Payload, &env); err != nil {
				t.Fatal(err)
			}
			if env["op"] != op {
				t.Errorf("op %v, want %s", env["op"], op)
			}
		})
	}
}

// TestDebeziumReads checks the read records: the initial snapshot
// (snapshot "true"), an incremental snapshot of a table added later
// ("incremental") and polling ("false"), with txId, lsn and sequence null.
func TestDebeziumReads(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE a (id int PRIMARY KEY, v text); INSERT INTO a VALUES (1, 'x')`)
	opt := db.dbzOptions("a")
	opt.Snapshot = "initial"
	s := open(t, opt, nil)
	got := collect(t, s, 1)
	if g, w := dbzNorm(got[0].Payload), dbzWant(db, "a", "r", `null`, `{"id":1,"v":"x"}`, "true", false); g != w {
		t.Errorf("snapshot:\n got %s\nwant %s", g, w)
	}
	db.exec(`INSERT INTO a VALUES (2, 'y')`)
	b := next(t, s)
	ack(t, s)
	st := b.State
	s.Close(context.Background())

	db.exec(`CREATE TABLE b (id int PRIMARY KEY, v int); INSERT INTO b VALUES (7, 70)`)
	opt.Tables = []string{"a", "b"}
	s = open(t, opt, st)
	got = collect(t, s, 1)
	if g, w := dbzNorm(got[0].Payload), dbzWant(db, "b", "r", `null`, `{"id":7,"v":70}`, "incremental", false); g != w {
		t.Errorf("incremental snapshot:\n got %s\nwant %s", g, w)
	}
	s.Close(context.Background())

	popt := db.dbzOptions("b")
	popt.Mode = postgressourceconfig.ModePolling
	p := open(t, popt, nil)
	got = collect(t, p, 1)
	if g, w := dbzNorm(got[0].Payload), dbzWant(db, "b", "r", `null`, `{"id":7,"v":70}`, "false", false); g != w {
		t.Errorf("polling:\n got %s\nwant %s", g, w)
	}
	if string(got[0].Key) != `{"id":7}` {
		t.Errorf("polling key %s", got[0].Key)
	}
}

// TestDebeziumUnchangedToast: an update that leaves a TOASTed value alone
// carries Debezium's placeholder with the default replica identity, and
// the value with FULL; table_settings apply (a masked column).
func TestDebeziumUnchangedToast(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE d (id int PRIMARY KEY, big text, n int, secret text);
CREATE TABLE f (id int PRIMARY KEY, big text, n int); ALTER TABLE f REPLICA IDENTITY FULL`)
	opt := db.dbzOptions("d", "f")
	opt.TableSettings = []postgressourceconfig.TableSettingsItem{{Table: "d", MaskColumns: []string{"secret"}, MaskValue: "****"}}
	s := open(t, opt, nil)
	// md5 chains do not compress, so the value is stored out of line.
	big := `(SELECT string_agg(md5(i::text), '') FROM generate_series(1, 400) i)`
	db.exec(`INSERT INTO d VALUES (1, ` + big + `, 0, 'hunter2'); INSERT INTO f VALUES (1, ` + big + `, 0)`)
	db.exec(`UPDATE d SET n = 1; UPDATE f SET n = 1`)
	got := collect(t, s, 4)
	want := `{"id":1,"big":"` + dbzUnavailable + `","n":1,"secret":"****"}`
	var env struct {
		Before, After json.RawMessage
	}
	if err := json.Unmarshal(got[2].Payload, &env); err != nil {
		t.Fatal(err)
	}
	if string(env.After) != want || string(env.Before) != "null" {
		t.Errorf("default identity update: before %s after %s, want null and %s", env.Before, env.After, want)
	}
	if err := json.Unmarshal(got[3].Payload, &env); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(got[3].Payload), dbzUnavailable) || !strings.Contains(string(env.After), `"n":1`) || !strings.Contains(string(env.Before), `"n":0`) {
		t.Errorf("FULL identity update should carry the value in before and after: %s", got[3].Payload)
	}
	for _, m := range got {
		if strings.Contains(string(m.Payload), "hunter2") {
			t.Errorf("a masked value went out: %s", m.Payload)
		}
	}
}

// BenchmarkDebeziumEnvelope reads the same 100,000 rows (benchTable: id,
// tenant, numeric amount, timestamptz, note) from copies of one slot with
// the stream reader, Poll + Ack, in the flat format and in Debezium's,
// interleaved so machine noise hits both alike, and reports both rates and
// their ratio (debezium/flat).
func BenchmarkDebeziumEnvelope(b *testing.B) {
	db, opt := benchTable(b)
	pristine := opt.ReplicationSlot
	opt.CDCReader = readerStream
	opt.CreateSlot = false
	opt.LogicalName = "bench"
	var flatT, dbzT time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, f := range []postgressourceconfig.RecordFormat{postgressourceconfig.RecordFormatFlat, postgressourceconfig.RecordFormatDebezium} {
			o := opt
			o.RecordFormat = f
			o.ReplicationSlot = fmt.Sprintf("fmt_%s_%s_%d", f, db.tag, i)
			copySlot(b, db, pristine, o.ReplicationSlot)
			d := sourcePass(b, o)
			if f == postgressourceconfig.RecordFormatFlat {
				flatT += d
			} else {
				dbzT += d
			}
			db.exec(`SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '` + o.ReplicationSlot + `' AND active_pid IS NOT NULL`)
			sdktest.WaitFor(b, 15*time.Second, "the slot to be inactive", func() bool {
				return db.value(`SELECT count(*) FROM pg_replication_slots WHERE slot_name = '`+o.ReplicationSlot+`' AND active`) == "0"
			})
			db.exec(`SELECT pg_drop_replication_slot('` + o.ReplicationSlot + `')`)
		}
	}
	n := float64(b.N * benchRows)
	b.ReportMetric(n/flatT.Seconds(), "flat-rows/s")
	b.ReportMetric(n/dbzT.Seconds(), "debezium-rows/s")
	b.ReportMetric(flatT.Seconds()/dbzT.Seconds(), "debezium/flat")
}

// TestTransactionMetadataFlat: every CDC record of the flat format carries
// its transaction's ID (__xid, the writer's txid_current()) and its
// position in it (__tx_order, from 1), across tables, and across a
// transaction split over batches and a restart inside it: the records the
// first run delivered are skipped and the numbering goes on.
func TestTransactionMetadataFlat(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE a (id int PRIMARY KEY); CREATE TABLE b (id int PRIMARY KEY)`)
	opt := db.cdcOptions("a", "b")
	opt.IncludeMetadata = true
	opt.BatchSize = 2
	s := open(t, opt, nil)
	xid := db.value(`WITH x AS (INSERT INTO a SELECT generate_series(1, 3) RETURNING 1), y AS (INSERT INTO b VALUES (1), (2) RETURNING 1)
SELECT txid_current()::text FROM (SELECT count(*) FROM x UNION ALL SELECT count(*) FROM y) z LIMIT 1`)
	first := next(t, s)
	ack(t, s)
	if len(first.Messages) != 2 {
		t.Fatalf("first batch has %d records, want 2 (batch_size)", len(first.Messages))
	}
	s.Close(context.Background())
	s = open(t, opt, first.State)
	rest := collect(t, s, 3)
	for i, m := range append(first.Messages, rest...) {
		v := decode(t, m)
		if v["__xid"] != json.Number(xid) {
			t.Errorf("record %d: __xid %v, want %s", i, v["__xid"], xid)
		}
		if v["__tx_order"] != json.Number(strconv.Itoa(i+1)) {
			t.Errorf("record %d: __tx_order %v, want %d: %s", i, v["__tx_order"], i+1, m.Payload)
		}
	}
}
