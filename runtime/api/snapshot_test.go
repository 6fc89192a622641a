package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/picomq/pico-connectors/sdk"
)

// fakeSnapper is a source's sdk.Snapshotter: it takes tables named t*.
type fakeSnapper struct {
	mu  sync.Mutex
	got []string
}

func (f *fakeSnapper) Snapshot(_ context.Context, names []string) error {
	for _, n := range names {
		if !strings.HasPrefix(n, "t") {
			return fmt.Errorf("%s is not one of tables", n)
		}
	}
	f.mu.Lock()
	f.got = append(f.got, names...)
	f.mu.Unlock()
	return nil
}

func (f *fakeSnapper) SnapshotProgress() []sdk.SnapshotProgress {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []sdk.SnapshotProgress
	for _, n := range f.got {
		out = append(out, sdk.SnapshotProgress{Name: n, State: sdk.SnapshotQueued})
	}
	return out
}

// snapTable is a table whose sources take snapshots through their
// trackers, as the supervisor's do.
type snapTable struct{ *table }

func (t snapTable) Snapshot(_ context.Context, key string, tables []string) error {
	t.mu.Lock()
	tr, ok := t.trackers[[2]string{KindSource, key}]
	t.mu.Unlock()
	if !ok {
		return ErrNotFound
	}
	sn := tr.Snapshotter()
	if sn == nil {
		return ErrNotRunning
	}
	return sn.Snapshot(context.Background(), tables)
}

func post(t *testing.T, url, key, body string) answer {
	t.Helper()
	hdr := map[string]string{}
	if key != "" {
		hdr["Authorization"] = "Bearer " + key
	}
	return doBody(t, nil, http.MethodPost, url, strings.NewReader(body), hdr)
}

// TestSnapshotRoute: POST /sources/{key}/snapshot needs the API key, hands
// the tables to the running source, answers 202 with the entry showing the
// progress, and says why it cannot otherwise (404, 409, 400).
func TestSnapshotRoute(t *testing.T) {
	tab := snapTable{newTable()}
	f := &fakeSnapper{}
	tab.trackers[[2]string{KindSource, "orders_cdc"}].SetSnapshotter(f)
	ts := newServer(t, tab, Options{APIKey: "k3y"})
	url := ts.URL + "/sources/orders_cdc/snapshot"

	if a := post(t, url, "", `{"tables":["t1"]}`); a.code != http.StatusUnauthorized {
		t.Fatalf("without the key: %d %s", a.code, a.body)
	}
	a := post(t, url, "k3y", `{"tables":["t1","t2"]}`)
	var e Entry
	a.decode(t, &e)
	if a.code != http.StatusAccepted || len(e.Snapshots) != 2 || e.Snapshots[1] != (sdk.SnapshotProgress{Name: "t2", State: "queued"}) {
		t.Fatalf("snapshot: %d %s", a.code, a.body)
	}
	if a := post(t, url, "k3y", `{"tables":["x"]}`); a.code != http.StatusBadRequest || !strings.Contains(string(a.body), "x is not one of tables") {
		t.Fatalf("refused table: %d %s", a.code, a.body)
	}
	for _, body := range []string{`{"tables":[]}`, `{"table":"t1"}`, `nope`} {
		if a := post(t, url, "k3y", body); a.code != http.StatusBadRequest {
			t.Fatalf("body %s: %d %s", body, a.code, a.body)
		}
	}
	if a := post(t, ts.URL+"/sources/random/snapshot", "k3y", `{"tables":["t1"]}`); a.code != http.StatusConflict {
		t.Fatalf("not running: %d %s", a.code, a.body)
	}
	if a := post(t, ts.URL+"/sources/nope/snapshot", "k3y", `{"tables":["t1"]}`); a.code != http.StatusNotFound {
		t.Fatalf("unknown: %d %s", a.code, a.body)
	}
	if a := post(t, ts.URL+"/sinks/archive/snapshot", "k3y", `{"tables":["t1"]}`); a.code != http.StatusNotFound {
		t.Fatalf("sink: %d %s", a.code, a.body)
	}
}
