package postgressource

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/sdk"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

// TestSnapshotThroughRuntime: the runtime (a subprocess) runs the source
// with snapshot = "never" on a table of 400 rows it never streams. POST
// /sources/snap/snapshot, with the API key, reads them onto the topic and
// the entry shows the snapshot done with its rows; the admin command, a
// second process, does it again. Without the key the route answers 401,
// for a table the source does not capture 400.
func TestSnapshotThroughRuntime(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the runtime binary; skipped with -short")
	}
	db := newDB(t)
	db.exec(`CREATE TABLE t (id int PRIMARY KEY, v int); INSERT INTO t SELECT i, 0 FROM generate_series(1, 400) i`)
	dir, bin, b := runtimeSetup(t)
	api := bigTxFreeAddr(t)
	const key = "k3y-for-the-test"
	os.MkdirAll(filepath.Join(dir, "connectors"), 0o755)
	os.WriteFile(filepath.Join(dir, "runtime.toml"), []byte(fmt.Sprintf("[broker]\nbootstrap_servers = %q\n[http]\naddress = %q\napi_key = %q\n[state]\npath = \"state\"\n[log]\nlevel = \"warn\"\n", b.Addr(), api, key)), 0o644)
	os.WriteFile(filepath.Join(dir, "connectors", "snap.toml"), []byte(fmt.Sprintf(`type = "source"
key = "snap"
path = "libpicomq_connector_postgres_source"
[[topics]]
topic = "pg.t"
create_topics = true
[plugin_config]
connection_string = %q
tables = ["public.t"]
batch_size = 150
poll_interval = "20ms"
replication_slot = "snap_%s"
publication = "snap_%s"
`, db.dsn, db.tag, db.tag)), 0o644)
	cmd, out := startRuntime(t, bin, dir)
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()

	type entry struct {
		Status    string                 `json:"status"`
		Snapshots []sdk.SnapshotProgress `json:"snapshots"`
	}
	call := func(method, path, auth, body string) (int, []byte) {
		req, _ := http.NewRequest(method, "http://"+api+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, data
	}
	get := func() entry {
		var e entry
		if code, body := call("GET", "/sources/snap", key, ""); code == 200 {
			json.Unmarshal(body, &e)
		}
		return e
	}
	sdktest.WaitFor(t, 60*time.Second, "the source running", func() bool { return get().Status == "Running" })
	if db.value(`SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'snap_`+db.tag+`'`) != "1" {
		t.Fatalf("no slot; output:\n%s", out.String())
	}

	if code, body := call("POST", "/sources/snap/snapshot", "", `{"tables":["public.t"]}`); code != 401 {
		t.Fatalf("without the key: %d %s", code, body)
	}
	if code, body := call("POST", "/sources/snap/snapshot", key, `{"tables":["public.other"]}`); code != 400 || !strings.Contains(string(body), "not one of tables") {
		t.Fatalf("another table: %d %s", code, body)
	}
	if code, body := call("POST", "/sources/snap/snapshot", key, `{"tables":["public.t"]}`); code != 202 {
		t.Fatalf("snapshot: %d %s", code, body)
	}
	done := func(rows int64) func() bool {
		return func() bool {
			for _, p := range get().Snapshots {
				if p.Name == "public.t" && p.State == sdk.SnapshotDone && p.Rows == rows {
					return true
				}
			}
			return false
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for !done(400)() {
		if time.Now().After(deadline) {
			_, body := call("GET", "/sources/snap", key, "")
			t.Fatalf("the snapshot is not done with 400 rows: %s\nruntime output:\n%s", body, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	sdktest.WaitFor(t, 30*time.Second, "400 records on pg.t", func() bool { return b.HighWatermark("pg.t") >= 400 })

	admin := exec.Command(bin, "admin", "--config", filepath.Join(dir, "runtime.toml"), "snap", "snapshot", "public.t")
	if msg, err := admin.CombinedOutput(); err != nil || !strings.Contains(string(msg), "requested a snapshot of public.t") {
		t.Fatalf("admin snapshot: %v\n%s", err, msg)
	}
	sdktest.WaitFor(t, 60*time.Second, "800 records on pg.t", func() bool { return b.HighWatermark("pg.t") >= 800 })
	sdktest.WaitFor(t, 30*time.Second, "the second snapshot done", done(400))
}
