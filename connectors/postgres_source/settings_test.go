package postgressource

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/sdk"
)

// The secrets of the customers table: none may reach a record, a key, a
// log line or the redacted configuration.
const (
	secretCard  = "4111-1111-1111-1111"
	secretEmail = "alice@example.com"
	secretNotes = "internal-only-note"
	hashKey     = "k3y-0f-the-hmac"
)

func hmacHex(v string) string {
	m := hmac.New(sha256.New, []byte(hashKey))
	m.Write([]byte(v))
	return hex.EncodeToString(m.Sum(nil))
}

const customersTable = `CREATE TABLE customers (id int PRIMARY KEY, tenant text NOT NULL, email text, card text, notes text, seq bigserial);
ALTER TABLE customers REPLICA IDENTITY FULL`

func customersSettings() postgressourceconfig.TableSettingsItem {
	ts := postgressourceconfig.DefaultTableSettingsItem()
	ts.Table = "customers"
	ts.ExcludeColumns = []string{"notes"}
	ts.MaskColumns = []string{"card"}
	ts.HashColumns = []string{"email"}
	ts.HashKey = confkit.NewSecret(hashKey)
	ts.KeyColumns = []string{"tenant", "id"}
	return ts
}

// debugLogs is a source environment whose log lines, at every level, go
// to a buffer.
func debugLogs() (sdk.Env, *logBuffer) {
	buf := &logBuffer{}
	env := sdk.Env{Key: "test", Logger: slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), Metrics: sdk.DiscardMetrics}
	return env, buf
}

func openEnv(t *testing.T, opt postgressourceconfig.Config, env sdk.Env) *Source {
	t.Helper()
	s, err := newSource(opt, env)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// checkCustomer checks one record of customers under customersSettings:
// no notes, card masked, email hashed, keyed by (tenant, id), and no
// secret anywhere in the payload or the key.
func checkCustomer(t *testing.T, m sdk.Message) map[string]any {
	t.Helper()
	for _, secret := range []string{secretCard, secretEmail, secretNotes, "4111", "alice@"} {
		if bytes.Contains(m.Payload, []byte(secret)) || bytes.Contains(m.Key, []byte(secret)) {
			t.Fatalf("%q reached a record: %s (key %s)", secret, m.Payload, m.Key)
		}
	}
	v := decode(t, m)
	if _, ok := v["notes"]; ok {
		t.Errorf("notes is excluded: %s", m.Payload)
	}
	for _, side := range []map[string]any{v, asMap(v["__before"])} {
		if side == nil {
			continue
		}
		if c, ok := side["card"]; ok && c != nil && c != "****" {
			t.Errorf("card not masked: %s", m.Payload)
		}
		if e, ok := side["email"]; ok && e != nil && e != hmacHex(secretEmail) && e != hmacHex("bob@example.com") {
			t.Errorf("email not hashed: %s", m.Payload)
		}
	}
	if k := string(m.Key); !strings.HasPrefix(k, `{"tenant":"acme","id":`) {
		t.Errorf("key %s, want (tenant, id)", k)
	}
	return v
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// TestTableSettingsEverywhere: exclude_columns, mask_columns, hash_columns
// and key_columns on snapshot, CDC (insert, update with __before, delete)
// and polling records; the secrets reach no record, no key, no log line
// (at debug level) and not the redacted configuration the API shows.
func TestTableSettingsEverywhere(t *testing.T) {
	db := newDB(t)
	db.exec(customersTable + `;
INSERT INTO customers (id, tenant, email, card, notes) VALUES (1, 'acme', '` + secretEmail + `', '` + secretCard + `', '` + secretNotes + `')`)
	env, logs := debugLogs()

	// CDC: the snapshot, then changes.
	opt := db.cdcOptions("customers")
	opt.Snapshot = postgressourceconfig.SnapshotInitial
	opt.IncludeMetadata = true
	opt.TableSettings = []postgressourceconfig.TableSettingsItem{customersSettings()}
	s := openEnv(t, opt, env)
	b := next(t, s)
	if len(b.Messages) != 1 {
		t.Fatalf("snapshot: %s", payloads(b))
	}
	v := checkCustomer(t, b.Messages[0])
	if v["__op"] != "read" || v["card"] != "****" || v["email"] != hmacHex(secretEmail) {
		t.Fatalf("snapshot record %s", b.Messages[0].Payload)
	}
	ack(t, s)
	db.exec(`INSERT INTO customers (id, tenant, email, card, notes) VALUES (2, 'acme', 'bob@example.com', '` + secretCard + `', '` + secretNotes + `');
UPDATE customers SET email = 'bob@example.com', notes = 'x' WHERE id = 1;
DELETE FROM customers WHERE id = 2`)
	var ops []string
	for len(ops) < 3 {
		b := next(t, s)
		for _, m := range b.Messages {
			v := checkCustomer(t, m)
			ops = append(ops, fmt.Sprint(v["__op"]))
			if v["__op"] == "update" {
				before := asMap(v["__before"])
				if before == nil || before["email"] != hmacHex(secretEmail) || before["card"] != "****" {
					t.Errorf("update's __before: %s", m.Payload)
				}
				if _, ok := before["notes"]; ok {
					t.Errorf("notes in __before: %s", m.Payload)
				}
			}
		}
		ack(t, s)
	}
	if fmt.Sprint(ops) != "[insert update delete]" {
		t.Fatalf("ops %v", ops)
	}

	// Polling, with the tracking column hashed: __tracking_value too.
	popt := db.pollOptions("customers")
	popt.TrackingColumn = "seq"
	popt.IncludeMetadata = true
	ts := customersSettings()
	ts.HashColumns = append(ts.HashColumns, "seq")
	popt.TableSettings = []postgressourceconfig.TableSettingsItem{ts}
	ps := openEnv(t, popt, env)
	pb := next(t, ps)
	if len(pb.Messages) != 1 {
		t.Fatalf("polling: %s", payloads(pb))
	}
	pv := checkCustomer(t, pb.Messages[0])
	if pv["__op"] != "read" || pv["seq"] != pv["__tracking_value"] || pv["seq"] != hmacHex("1") {
		t.Fatalf("polling record %s", pb.Messages[0].Payload)
	}
	ack(t, ps)
	t.Logf("snapshot: %s key %s", b.Messages[0].Payload, b.Messages[0].Key)
	t.Logf("polling: %s key %s", pb.Messages[0].Payload, pb.Messages[0].Key)

	for _, secret := range []string{secretCard, secretEmail, secretNotes, hashKey} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("%q reached the logs:\n%s", secret, logs.String())
		}
		if red := fmt.Sprint(opt.Redacted()); strings.Contains(red, secret) {
			t.Errorf("%q is in the redacted configuration: %s", secret, red)
		}
	}
	if red := fmt.Sprint(opt.Redacted()); !strings.Contains(red, "card") {
		t.Errorf("the redacted configuration lost table_settings: %s", red)
	}
}

// TestTableSettingsIncludeAndHashedKey: include_columns keeps only the
// named columns in the value; a hashed primary key column is hashed in
// the key too, the same in the snapshot, CDC and polling.
func TestTableSettingsIncludeAndHashedKey(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE acct (id text PRIMARY KEY, owner text, balance int);
INSERT INTO acct VALUES ('ssn-123', 'ann', 10)`)
	ts := postgressourceconfig.DefaultTableSettingsItem()
	ts.Table = "public.acct"
	ts.IncludeColumns = []string{"id", "balance"}
	ts.HashColumns = []string{"id"}
	ts.HashKey = confkit.NewSecret(hashKey)
	want := fmt.Sprintf(`{"id":"%s","balance":`, hmacHex("ssn-123"))
	wantKey := fmt.Sprintf(`{"id":"%s"}`, hmacHex("ssn-123"))

	opt := db.cdcOptions("acct")
	opt.Snapshot = postgressourceconfig.SnapshotInitial
	opt.TableSettings = []postgressourceconfig.TableSettingsItem{ts}
	s := open(t, opt, nil)
	db.exec(`UPDATE acct SET balance = 11`)
	var got []sdk.Message
	for len(got) < 2 {
		got = append(got, next(t, s).Messages...)
		ack(t, s)
	}
	popt := db.pollOptions("acct")
	popt.TableSettings = []postgressourceconfig.TableSettingsItem{ts}
	ps := open(t, popt, nil)
	got = append(got, next(t, ps).Messages...)
	for _, m := range got {
		if !strings.HasPrefix(string(m.Payload), want) || strings.Contains(string(m.Payload), "owner") || string(m.Key) != wantKey {
			t.Errorf("record %s key %s; want %s... keyed %s", m.Payload, m.Key, want, wantKey)
		}
	}
}

// TestTableSettingsErrors: what table_settings refuses, with the key.
func TestTableSettingsErrors(t *testing.T) {
	db := newDB(t)
	db.exec(customersTable)
	cases := []struct {
		set  func(ts *postgressourceconfig.TableSettingsItem, o *postgressourceconfig.Config)
		want string
	}{
		{func(ts *postgressourceconfig.TableSettingsItem, o *postgressourceconfig.Config) { ts.Table = "other" },
			"table_settings[0].table: public.other is not one of tables"},
		{func(ts *postgressourceconfig.TableSettingsItem, o *postgressourceconfig.Config) {
			ts.IncludeColumns = []string{"id"}
		},
			"table_settings[0].exclude_columns: include_columns and exclude_columns: choose one"},
		{func(ts *postgressourceconfig.TableSettingsItem, o *postgressourceconfig.Config) {
			ts.HashColumns = []string{"email", "card"}
		},
			`column "card" is in mask_columns and hash_columns`},
		{func(ts *postgressourceconfig.TableSettingsItem, o *postgressourceconfig.Config) {
			ts.MaskColumns = []string{"tenant"}
		},
			`column "tenant" is in key_columns`},
		{func(ts *postgressourceconfig.TableSettingsItem, o *postgressourceconfig.Config) {
			ts.KeyColumns = nil
			ts.MaskColumns = []string{"id"}
		}, `table_settings[0].mask_columns: column "id" of table public.customers is the primary key`},
		{func(ts *postgressourceconfig.TableSettingsItem, o *postgressourceconfig.Config) {
			ts.ExcludeColumns = []string{"nope"}
		},
			`table_settings[0].exclude_columns: table public.customers has no column "nope"`},
		{func(ts *postgressourceconfig.TableSettingsItem, o *postgressourceconfig.Config) {
			o.TableSettings = append(o.TableSettings, *ts)
			o.TableSettings[1].Table = "public.customers"
		}, "table_settings[1].table: public.customers already has settings in table_settings[0]"},
		{func(ts *postgressourceconfig.TableSettingsItem, o *postgressourceconfig.Config) {
			ts.HashKey = confkit.Secret{}
		},
			"hash_key is required with hash_columns"},
	}
	for _, c := range cases {
		opt := db.pollOptions("customers")
		opt.TrackingColumn = "seq"
		ts := customersSettings()
		opt.TableSettings = []postgressourceconfig.TableSettingsItem{ts}
		c.set(&opt.TableSettings[0], &opt)
		_, err := openSource(opt, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), hashKey) {
			t.Errorf("the error shows hash_key: %v", err)
		}
	}
}

// TestTableSettingsIncrementalKeyColumns: the incremental snapshot of a
// table added later, keyed by tenant (key_columns), reads every row: its
// chunk matches rows to the stream's changes by primary key, not by the
// record key, which 30 rows share among 3 tenants.
func TestTableSettingsIncrementalKeyColumns(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE a (id int PRIMARY KEY); INSERT INTO a VALUES (1)`)
	opt := db.cdcOptions("a")
	opt.Snapshot = postgressourceconfig.SnapshotInitial
	s := open(t, opt, nil)
	next(t, s) // the initial snapshot of a
	ack(t, s)
	db.exec(`INSERT INTO a VALUES (2)`)
	b := next(t, s)
	ack(t, s)
	s.Close(context.Background())

	db.exec(`CREATE TABLE b (id int PRIMARY KEY, tenant text); INSERT INTO b SELECT i, 't' || (i % 3) FROM generate_series(1, 30) i`)
	opt.Tables = []string{"a", "b"}
	ts := postgressourceconfig.DefaultTableSettingsItem()
	ts.Table, ts.KeyColumns = "b", []string{"tenant"}
	opt.TableSettings = []postgressourceconfig.TableSettingsItem{ts}
	s = open(t, opt, b.State)
	ids := map[string]bool{}
	for len(ids) < 30 {
		b := next(t, s)
		for _, m := range b.Messages {
			v := decode(t, m)
			if !strings.HasPrefix(string(m.Key), `{"tenant":"t`) {
				t.Fatalf("key %s", m.Key)
			}
			ids[fmt.Sprint(v["id"])] = true
		}
		ack(t, s)
	}
	empty(t, s)
}

// TestTableSettingsLoad: [[plugin_config.table_settings]] blocks load from
// a definition's TOML, the redacted configuration (what the API shows)
// masks hash_key, and the environment variable replaces the list.
func TestTableSettingsLoad(t *testing.T) {
	var def struct {
		PluginConfig map[string]any `toml:"plugin_config"`
	}
	src := `[plugin_config]
connection_string = "postgres://u:p@127.0.0.1:5432/db"
tables = ["public.customers", "public.orders"]

[[plugin_config.table_settings]]
table = "public.customers"
exclude_columns = ["notes"]
mask_columns = ["card"]
hash_columns = ["email"]
hash_key = "` + hashKey + `"
key_columns = ["tenant", "id"]

[[plugin_config.table_settings]]
table = "orders"
include_columns = ["id", "amount"]
`
	if _, err := toml.Decode(src, &def); err != nil {
		t.Fatal(err)
	}
	cfg, err := postgressourceconfig.Load(def.PluginConfig, "P_", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if err := check(cfg); err != nil {
		t.Fatal(err)
	}
	ts := cfg.TableSettings
	if len(ts) != 2 || ts[0].MaskValue != "****" || ts[0].HashKey.Reveal() != hashKey || fmt.Sprint(ts[0].KeyColumns) != "[tenant id]" || fmt.Sprint(ts[1].IncludeColumns) != "[id amount]" {
		t.Fatalf("loaded %+v", ts)
	}
	red := fmt.Sprint(cfg.Redacted())
	if strings.Contains(red, hashKey) || !strings.Contains(red, "****") {
		t.Fatalf("redacted: %s", red)
	}
	env := map[string]string{"P_TABLE_SETTINGS": `[{"table": "public.orders", "hash_columns": ["id"], "hash_key": "k"}]`}
	cfg, err = postgressourceconfig.Load(def.PluginConfig, "P_", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.TableSettings) != 1 || cfg.TableSettings[0].Table != "public.orders" || cfg.TableSettings[0].HashKey.Reveal() != "k" {
		t.Fatalf("from the environment: %+v", cfg.TableSettings)
	}
}
