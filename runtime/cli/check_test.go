package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/servertest/fleet"
	"github.com/picomq/pico-connectors/runtime/servertest/pgtest"
	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
)

// The check tests run pico-connectors check (cli.Main) against real
// servers, one case per precondition: each prints its problem on the
// connector's row with the check's name, exits 1 and shows no secret.

// freeLoopback returns a 127.0.0.1 address nothing listens on.
func freeLoopback(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// checkRuntimeTOML is a runtime config on an embedded broker at a free
// address, state in files beside it.
func checkRuntimeTOML(t *testing.T) string {
	return fmt.Sprintf("[broker]\nembedded_address = %q\ndata_dir = \"broker-data\"\n[state]\nstorage = \"file\"\npath = \"state\"\n", freeLoopback(t))
}

// runCheck runs check with --json and as a table; it returns the exit
// code, the table and the decoded JSON rows.
func runCheck(t *testing.T, cfg string, env []string, args ...string) (int, string, []checkRow) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(append([]string{"check", "--config", cfg}, args...), &out, &errOut, env)
	var jout, jerr bytes.Buffer
	jcode := Main(append([]string{"check", "--config", cfg, "--json"}, args...), &jout, &jerr, env)
	if jcode != code {
		t.Fatalf("check exited %d, check --json %d\n%s", code, jcode, out.String())
	}
	var rep struct {
		OK     bool       `json:"ok"`
		Checks []checkRow `json:"checks"`
	}
	if err := json.Unmarshal(jout.Bytes(), &rep); err != nil {
		t.Fatalf("check --json: %v\n%s%s", err, jout.String(), jerr.String())
	}
	if rep.OK != (code == 0) {
		t.Fatalf("check --json says ok = %v, exit code %d", rep.OK, code)
	}
	t.Logf("check (exit %d):\n%s%s", code, out.String(), errOut.String())
	return code, out.String() + errOut.String() + jout.String() + jerr.String(), rep.Checks
}

// wantProblem fails unless check exited 1 with a failed row of connector
// and check whose problem holds each of want, and shows none of secrets.
func wantProblem(t *testing.T, code int, text string, rows []checkRow, connector, check string, secrets []string, want ...string) {
	t.Helper()
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	found := false
	for _, r := range rows {
		if r.Connector != connector || r.Check != check {
			continue
		}
		found = true
		if r.OK {
			t.Errorf("%s %q passed, want a problem: %+v", connector, check, r)
		}
		for _, w := range want {
			if !strings.Contains(r.Problem, w) {
				t.Errorf("%s %q: problem %q does not say %q", connector, check, r.Problem, w)
			}
		}
		if r.Fix == "" {
			t.Errorf("%s %q: no fix", connector, check)
		}
	}
	if !found {
		t.Errorf("no row %s %q in %+v", connector, check, rows)
	}
	if !strings.Contains(text, "PROBLEM: ") || !strings.Contains(text, connector) {
		t.Errorf("the table names no problem of %s", connector)
	}
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("the output shows the secret %q", s)
		}
	}
}

// lakeDef is the S3 sink definition of the check tests; the cases change
// its bucket and keys through environment overrides.
func lakeDef(srv *s3test.Server) map[string]string {
	return map[string]string{"s3.toml": fleet.S3SinkDef("lake", `numbers.*`, srv, 10, "", "")}
}

const lakeEnv = "PICOMQ_CONNECTORS_SINK_LAKE_PLUGIN_CONFIG_"

func TestCheckS3(t *testing.T) {
	srv := s3test.Start(t)
	wrongSecret := "wrong-S3CRET-" + srv.SecretKey[:6]
	t.Run("healthy", func(t *testing.T) {
		cfg := setup(t, checkRuntimeTOML(t), lakeDef(srv))
		code, text, rows := runCheck(t, cfg, nil)
		if code != 0 {
			t.Fatalf("exit %d, want 0", code)
		}
		for _, name := range []string{"credentials", "bucket exists", "region", "PutObject (probe object)", "ListBucket", "encryption"} {
			if !hasRow(rows, "sink/lake", name, true) {
				t.Errorf("no passed row sink/lake %q", name)
			}
		}
		if strings.Contains(text, srv.SecretKey) {
			t.Error("the output shows the secret key")
		}
	})
	t.Run("wrong key", func(t *testing.T) {
		cfg := setup(t, checkRuntimeTOML(t), lakeDef(srv))
		code, text, rows := runCheck(t, cfg, []string{lakeEnv + "SECRET_ACCESS_KEY=" + wrongSecret})
		wantProblem(t, code, text, rows, "sink/lake", "credentials", []string{wrongSecret, srv.SecretKey}, "refuses access_key_id and secret_access_key")
	})
	t.Run("other region", func(t *testing.T) {
		cfg := setup(t, checkRuntimeTOML(t), lakeDef(srv))
		code, text, rows := runCheck(t, cfg, []string{lakeEnv + "REGION=eu-west-1"})
		wantProblem(t, code, text, rows, "sink/lake", "region", []string{srv.SecretKey}, "is not in region 'eu-west-1'")
	})
	t.Run("missing bucket", func(t *testing.T) {
		cfg := setup(t, checkRuntimeTOML(t), lakeDef(srv))
		code, text, rows := runCheck(t, cfg, []string{lakeEnv + "BUCKET=no-such-bucket"})
		wantProblem(t, code, text, rows, "sink/lake", "bucket exists", []string{srv.SecretKey}, "bucket 'no-such-bucket' does not exist")
	})
}

func hasRow(rows []checkRow, connector, check string, ok bool) bool {
	for _, r := range rows {
		if r.Connector == connector && r.Check == check && r.OK == ok {
			return true
		}
	}
	return false
}

// TestCheckS3WithoutListBucket gives a user of versitygw's own IAM a
// bucket policy with s3:PutObject and s3:DeleteObject but not
// s3:ListBucket, which exactly_once needs.
func TestCheckS3WithoutListBucket(t *testing.T) {
	if os.Getenv("PICO_TEST_S3") == "minio" {
		t.Skip("users and bucket policies are set up on versitygw (the default S3 server) only")
	}
	srv := s3test.StartIAM(t)
	access, secret := "PICOWRITER1", "writer-S3CRET-only-put"
	if err := srv.CreateUser(access, secret); err != nil {
		t.Fatal(err)
	}
	policy := fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":[%q]},"Action":["s3:PutObject","s3:DeleteObject"],"Resource":["arn:aws:s3:::%s/*"]}]}`, access, srv.Bucket)
	if _, err := srv.Client.PutBucketPolicy(context.Background(), &s3.PutBucketPolicyInput{Bucket: aws.String(srv.Bucket), Policy: aws.String(policy)}); err != nil {
		t.Fatal(err)
	}
	cfg := setup(t, checkRuntimeTOML(t), lakeDef(srv))
	env := []string{lakeEnv + "ACCESS_KEY_ID=" + access, lakeEnv + "SECRET_ACCESS_KEY=" + secret}
	code, text, rows := runCheck(t, cfg, env)
	wantProblem(t, code, text, rows, "sink/lake", "ListBucket", []string{secret, srv.SecretKey}, "listing bucket '"+srv.Bucket+"' failed", "AccessDenied")
	if !hasRow(rows, "sink/lake", "PutObject (probe object)", true) || !hasRow(rows, "sink/lake", "credentials", true) {
		t.Errorf("credentials and PutObject should pass for this user: %+v", rows)
	}
	// buffered delivery lists nothing: the same user passes.
	code, _, _ = runCheck(t, cfg, append(env, lakeEnv+"DELIVERY=buffered"))
	if code != 0 {
		t.Errorf("delivery = buffered without ListBucket: exit %d, want 0", code)
	}
}

// TestCheckDemo checks examples/demo as make demo runs it (the S3 sink
// enabled against a local S3 server): every check passes.
func TestCheckDemo(t *testing.T) {
	srv := s3test.Start(t)
	dir := t.TempDir()
	for _, f := range []string{"runtime.toml", "connectors/random.toml", "connectors/s3.toml"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "examples", "demo", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{
		"PICOMQ_CONNECTORS_BROKER_EMBEDDED_ADDRESS=" + freeLoopback(t),
		"PICOMQ_CONNECTORS_SINK_DEMO_S3_ENABLED=true",
		"PICOMQ_CONNECTORS_SINK_DEMO_S3_PLUGIN_CONFIG_ENDPOINT=" + srv.Endpoint,
		"PICOMQ_CONNECTORS_SINK_DEMO_S3_PLUGIN_CONFIG_BUCKET=" + srv.Bucket,
		"PICOMQ_CONNECTORS_SINK_DEMO_S3_PLUGIN_CONFIG_ACCESS_KEY_ID=" + srv.AccessKey,
		"PICOMQ_CONNECTORS_SINK_DEMO_S3_PLUGIN_CONFIG_SECRET_ACCESS_KEY=" + srv.SecretKey,
	}
	code, text, rows := runCheck(t, filepath.Join(dir, "runtime.toml"), env)
	if code != 0 {
		t.Fatalf("exit %d, want 0:\n%s", code, text)
	}
	if !hasRow(rows, "sink/demo_s3", "PutObject (probe object)", true) || !hasRow(rows, "runtime", "embedded broker address", true) {
		t.Errorf("the demo's sink and broker were not checked: %+v", rows)
	}
	if strings.Contains(text, srv.SecretKey) {
		t.Error("the output shows the secret key")
	}
	// One key only.
	_, _, rows = runCheck(t, filepath.Join(dir, "runtime.toml"), env, "demo_random")
	for _, r := range rows {
		if r.Connector == "sink/demo_s3" {
			t.Errorf("check demo_random checked the sink: %+v", r)
		}
	}
	// The sink as the demo's file has it, disabled: checked when named.
	var disabled []string
	for _, e := range env {
		if !strings.Contains(e, "_ENABLED=") {
			disabled = append(disabled, e)
		}
	}
	if _, _, rows := runCheck(t, filepath.Join(dir, "runtime.toml"), disabled); !hasRow(rows, "sink/demo_s3", "enabled", true) {
		t.Errorf("the disabled sink was not reported as such: %+v", rows)
	}
	if code, _, rows := runCheck(t, filepath.Join(dir, "runtime.toml"), disabled, "demo_s3"); code != 0 || !hasRow(rows, "sink/demo_s3", "ListBucket", true) {
		t.Errorf("check demo_s3 (disabled) exited %d and did not check it: %+v", code, rows)
	}
}

func TestCheckBrokerDown(t *testing.T) {
	addr := freeLoopback(t)
	runtime := fmt.Sprintf("[broker]\nbootstrap_servers = %q\n[state]\nstorage = \"file\"\npath = \"state\"\n", addr)
	cfg := setup(t, runtime, map[string]string{"def.toml": validSink})
	code, text, rows := runCheck(t, cfg, nil)
	wantProblem(t, code, text, rows, "runtime", "broker reachable", nil, "broker.bootstrap_servers = "+addr+" did not answer")
}

// TestCheckBrokerTopics looks up a source's topics on a running broker:
// present, missing with create_topics (creatable), missing without it (a
// problem); and the broker state store's topic.
func TestCheckBrokerTopics(t *testing.T) {
	b, err := broker.Start(broker.Config{Address: "127.0.0.1:0", SeedTopics: []string{"present"}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	runtime := fmt.Sprintf("[broker]\nbootstrap_servers = %q\n[state]\nstorage = \"broker\"\n", b.Addr())
	def := `type = "source"
key = "numbers"
path = "libpicomq_connector_random_source"

[[topics]]
topic = "present"

[[topics]]
topic = "creatable"
create_topics = true

[[topics]]
topic = "absent"
`
	cfg := setup(t, runtime, map[string]string{"def.toml": def})
	code, text, rows := runCheck(t, cfg, nil)
	wantProblem(t, code, text, rows, "runtime", "topic absent (source/numbers)", nil, `topic "absent" does not exist and source/numbers has create_topics = false`)
	for _, name := range []string{"broker reachable", "topic present (source/numbers)", "topic creatable (source/numbers)", "topic pico-connectors.state.numbers (state of source/numbers)"} {
		if !hasRow(rows, "runtime", name, true) {
			t.Errorf("no passed row runtime %q", name)
		}
	}
	for _, r := range rows {
		if r.Connector == "runtime" && strings.HasPrefix(r.Check, "state store") {
			t.Errorf("the broker store is checked through its topics, not as %q", r.Check)
		}
	}
}

func pgSourceDef(dsn, mode, table string) string {
	return fleet.SourceDef("orders", "libpicomq_connector_postgres_source", "orders",
		fmt.Sprintf("connection_string = %q\nmode = %q\ntables = [%q]\n", dsn, mode, table))
}

// TestCheckPostgres runs the Postgres cases on one server: healthy CDC
// and polling, a missing table, a user without REPLICATION, then the
// server restarted with wal_level = replica.
func TestCheckPostgres(t *testing.T) {
	pg := pgtest.Start(t)
	pg.Exec(t, `CREATE TABLE orders (id serial PRIMARY KEY, tenant text);
CREATE ROLE norepl LOGIN PASSWORD 'pg-S3CRET-norepl';
GRANT SELECT ON orders TO norepl`)
	// Trust authentication ignores the password; it is there to be hidden.
	secret := "pg-S3CRET-norepl"
	dsn := func(user string) string {
		return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/postgres?sslmode=disable", user, secret, pg.Port)
	}
	run := func(t *testing.T, def string) (int, string, []checkRow) {
		cfg := setup(t, checkRuntimeTOML(t), map[string]string{"pg.toml": def})
		return runCheck(t, cfg, nil)
	}
	t.Run("healthy cdc", func(t *testing.T) {
		code, text, rows := run(t, pgSourceDef(dsn("postgres"), "cdc", "public.orders"))
		if code != 0 {
			t.Fatalf("exit %d, want 0", code)
		}
		for _, name := range []string{"connects", "table public.orders", "SELECT on public.orders", "wal_level = logical", "REPLICATION attribute",
			"replica identity of public.orders", `publication "picomq_orders"`, `replication slot "picomq_orders"`, "free replication slots"} {
			if !hasRow(rows, "source/orders", name, true) {
				t.Errorf("no passed row source/orders %q", name)
			}
		}
		if strings.Contains(text, secret) {
			t.Error("the output shows the password")
		}
		// check creates nothing.
		var n int
		if err := pgtest.QueryRow(pg.DSN(), `SELECT (SELECT count(*) FROM pg_replication_slots) + (SELECT count(*) FROM pg_publication)`, &n); err != nil || n != 0 {
			t.Errorf("check left %d slots and publications (%v)", n, err)
		}
	})
	t.Run("server unreachable", func(t *testing.T) {
		down := fmt.Sprintf("postgres://norepl:%s@%s/postgres?sslmode=disable&connect_timeout=2", secret, freeLoopback(t))
		code, text, rows := run(t, pgSourceDef(down, "cdc", "public.orders"))
		wantProblem(t, code, text, rows, "source/orders", "connects", []string{secret}, "connection_string: ")
	})
	t.Run("missing table", func(t *testing.T) {
		code, text, rows := run(t, pgSourceDef(dsn("postgres"), "polling", "public.nope"))
		wantProblem(t, code, text, rows, "source/orders", "table public.nope", []string{secret}, "tables: public.nope does not exist")
	})
	t.Run("no REPLICATION", func(t *testing.T) {
		code, text, rows := run(t, pgSourceDef(dsn("norepl"), "cdc", "public.orders"))
		wantProblem(t, code, text, rows, "source/orders", "REPLICATION attribute", []string{secret}, `user "norepl" lacks the REPLICATION privilege`)
		if !hasRow(rows, "source/orders", "SELECT on public.orders", true) {
			t.Errorf("norepl has SELECT: %+v", rows)
		}
	})
	t.Run("no SELECT", func(t *testing.T) {
		pg.Exec(t, `CREATE TABLE secrets (id int PRIMARY KEY)`)
		code, text, rows := run(t, pgSourceDef(dsn("norepl"), "polling", "public.secrets"))
		wantProblem(t, code, text, rows, "source/orders", "SELECT on public.secrets", []string{secret}, `user "norepl" lacks SELECT on table public.secrets`)
	})
	t.Run("wal_level replica", func(t *testing.T) {
		pg.Exec(t, `ALTER SYSTEM SET wal_level = replica`)
		pg.Restart(t)
		code, text, rows := run(t, pgSourceDef(dsn("postgres"), "cdc", "public.orders"))
		wantProblem(t, code, text, rows, "source/orders", "wal_level = logical", []string{secret}, "postgres has wal_level = replica; CDC needs wal_level = logical")
		// Polling needs no logical decoding.
		if code, _, _ := run(t, pgSourceDef(dsn("postgres"), "polling", "public.orders")); code != 0 {
			t.Errorf("polling on wal_level = replica: exit %d, want 0", code)
		}
	})
}

// TestCheckBinary runs check in the pico-connectors binary on a sink with
// a wrong secret key: the problem row, exit status 1, no secret.
func TestCheckBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	bin := runtimebin.Build(t)
	srv := s3test.Start(t)
	cfg := setup(t, checkRuntimeTOML(t), lakeDef(srv))
	wrong := "wrong-S3CRET-binary"
	cmd := exec.Command(bin, "check", "--config", cfg)
	cmd.Env = append(os.Environ(), lakeEnv+"SECRET_ACCESS_KEY="+wrong)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("check exited with %v, want status 1:\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)^sink/lake +credentials +PROBLEM: the S3 store refuses access_key_id and secret_access_key`).Match(out) {
		t.Errorf("no credentials problem on sink/lake's row:\n%s", out)
	}
	if strings.Contains(string(out), wrong) || strings.Contains(string(out), srv.SecretKey) {
		t.Errorf("the output shows a secret:\n%s", out)
	}
}
