package icetable

import (
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
)

// restServer is a REST catalog (the endpoints icetable uses) in front of
// iceberg-go's sql catalog on the test's PostgreSQL: enough to run
// icetable against the rest catalog client, its 409 conflicts included.
type restServer struct {
	*httptest.Server
	conflicts atomic.Int64 // commits answered 409
}

func newRESTServer(t *testing.T, e *env, token string) *restServer {
	t.Helper()
	db, err := sql.Open("pgx", e.cfg.URI)
	if err != nil {
		t.Fatal(err)
	}
	props := e.cfg.fileIOProps()
	props["warehouse"] = e.cfg.Warehouse
	cat, err := sqlcat.NewCatalog("rest", db, sqlcat.Postgres, props)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s := &restServer{}
	reply := func(w http.ResponseWriter, code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(v)
	}
	fail := func(w http.ResponseWriter, err error) {
		code, typ := http.StatusInternalServerError, "ServerError"
		switch {
		case errors.Is(err, catalog.ErrNoSuchTable):
			code, typ = http.StatusNotFound, "NoSuchTableException"
		case errors.Is(err, catalog.ErrNoSuchNamespace):
			code, typ = http.StatusNotFound, "NoSuchNamespaceException"
		case errors.Is(err, catalog.ErrTableAlreadyExists), errors.Is(err, catalog.ErrNamespaceAlreadyExists):
			code, typ = http.StatusConflict, "AlreadyExistsException"
		case errors.Is(err, table.ErrCommitFailed), strings.Contains(err.Error(), "requirement failed"):
			code, typ = http.StatusConflict, "CommitFailedException"
			s.conflicts.Add(1)
		}
		reply(w, code, map[string]any{"error": map[string]any{"message": err.Error(), "type": typ, "code": code}})
	}
	loaded := func(w http.ResponseWriter, tbl *table.Table) {
		reply(w, http.StatusOK, map[string]any{"metadata-location": tbl.MetadataLocation(), "metadata": tbl.Metadata(), "config": map[string]string{}})
	}
	ident := func(r *http.Request) table.Identifier {
		return append(strings.Split(r.PathValue("ns"), "\x1f"), r.PathValue("tbl"))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/config", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, map[string]any{"defaults": map[string]string{}, "overrides": map[string]string{}})
	})
	mux.HandleFunc("GET /v1/namespaces/{ns}", func(w http.ResponseWriter, r *http.Request) {
		ns := strings.Split(r.PathValue("ns"), "\x1f")
		props, err := cat.LoadNamespaceProperties(r.Context(), ns)
		if err != nil {
			fail(w, err)
			return
		}
		reply(w, http.StatusOK, map[string]any{"namespace": ns, "properties": props})
	})
	mux.HandleFunc("POST /v1/namespaces", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Namespace  table.Identifier   `json:"namespace"`
			Properties iceberg.Properties `json:"properties"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			fail(w, err)
			return
		}
		if err := cat.CreateNamespace(r.Context(), req.Namespace, req.Properties); err != nil {
			fail(w, err)
			return
		}
		reply(w, http.StatusOK, map[string]any{"namespace": req.Namespace, "properties": map[string]string{}})
	})
	mux.HandleFunc("GET /v1/namespaces/{ns}/tables/{tbl}", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			reply(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{"message": "no token", "type": "NotAuthorizedException", "code": 401}})
			return
		}
		tbl, err := cat.LoadTable(r.Context(), ident(r))
		if err != nil {
			fail(w, err)
			return
		}
		loaded(w, tbl)
	})
	mux.HandleFunc("POST /v1/namespaces/{ns}/tables", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Name   string                 `json:"name"`
			Schema *iceberg.Schema        `json:"schema"`
			Spec   *iceberg.PartitionSpec `json:"partition-spec"`
			Props  iceberg.Properties     `json:"properties"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			fail(w, err)
			return
		}
		id := append(strings.Split(r.PathValue("ns"), "\x1f"), req.Name)
		tbl, err := cat.CreateTable(r.Context(), id, req.Schema, catalog.WithPartitionSpec(req.Spec), catalog.WithProperties(req.Props))
		if err != nil {
			fail(w, err)
			return
		}
		loaded(w, tbl)
	})
	mux.HandleFunc("POST /v1/namespaces/{ns}/tables/{tbl}", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Requirements table.Requirements `json:"requirements"`
			Updates      table.Updates      `json:"updates"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			fail(w, err)
			return
		}
		meta, loc, err := cat.CommitTable(r.Context(), ident(r), req.Requirements, req.Updates)
		if err != nil {
			fail(w, err)
			return
		}
		reply(w, http.StatusOK, map[string]any{"metadata-location": loc, "metadata": meta})
	})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// TestRESTCatalog runs icetable on the rest catalog client: create, commit,
// offsets, scan, and a conflict (HTTP 409) retried on the new state.
func TestRESTCatalog(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	srv := newRESTServer(t, e, "TokenSecret1")
	e.cfg.Catalog, e.cfg.URI, e.cfg.Token = "rest", srv.URL, "TokenSecret1"
	a, b := e.open(baseCols, daySpec), e.open(baseCols, daySpec)
	tp0, tp1 := TopicPartition{"t", 0}, TopicPartition{"t", 1}
	if _, err := a.Commit(ctx, []DataFile{uploadRows(e, "a.parquet", tp0, 0, 2, day0)}, map[TopicPartition]int64{tp0: 2}, nil); err != nil {
		t.Fatal(err)
	}
	res, err := b.Commit(ctx, []DataFile{uploadRows(e, "b.parquet", tp1, 0, 3, day0)}, map[TopicPartition]int64{tp1: 3}, nil)
	if err != nil || res.Retries != 1 || len(res.Dropped) != 0 || srv.conflicts.Load() != 1 {
		t.Fatalf("b.Commit on a stale table = %+v, %v (%d conflicts); want one 409 and a retry", res, err, srv.conflicts.Load())
	}
	offs, _, err := a.Offsets(ctx)
	if want := map[TopicPartition]int64{tp0: 2, tp1: 3}; err != nil || !reflect.DeepEqual(offs, want) {
		t.Fatalf("Offsets = %v, %v; want %v", offs, err, want)
	}
	if got := offsetsOf(scan(t, a)); got != "t/0:0 t/0:1 t/1:0 t/1:1 t/1:2" {
		t.Fatalf("scanned %s", got)
	}
	e.cfg.Token = "wrong"
	if _, err := Open(ctx, e.cfg, baseCols, daySpec); err == nil || !strings.Contains(err.Error(), "no token") {
		t.Fatalf("Open with a wrong token: %v; want the catalog's refusal", err)
	}
}
