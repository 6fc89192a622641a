package s3sink

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/runtime/servertest/faultproxy"
	"github.com/picomq/pico-connectors/runtime/servertest/pgtest"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
)

// TestIcebergWritesWithTheRole: with role_arn, the table's metadata and
// manifests (written by iceberg-go's FileIO) are signed with the role's
// credentials, as the data files are, not with the static keys the role is
// assumed with: a bucket policy that lets only the role write the
// warehouse accepts the whole table. A proxy in front of MinIO notes the
// access key of every PUT.
func TestIcebergWritesWithTheRole(t *testing.T) {
	srv := s3test.StartMinio(t, s3test.MinioOptions{})
	proxy := faultproxy.Start(t, srv.Endpoint)
	credential := regexp.MustCompile(`Credential=([^/]+)/`)
	var mu sync.Mutex
	keyOf := map[string]string{} // object path -> access key of its PUT
	proxy.InjectMatching(func(r *http.Request) bool {
		if r.Method == http.MethodPut {
			if m := credential.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
				mu.Lock()
				keyOf[r.URL.Path] = m[1]
				mu.Unlock()
			}
		}
		return false
	}, -1, faultproxy.Fault{})
	dsn := pgtest.Start(t).CreateDatabase(t, "iceberg")
	s := openAt(t, srv, proxy.URL, "lake", func(o *options) {
		o.Role.ARN = "arn:minio:iam:::role/pico-sink"
		o.Role.STSEndpoint = srv.Endpoint
		o.Format, o.Columns, o.MaxMessages, o.RotateByMessages = formatParquet, []columnSpec{{Name: "n", Type: "int64"}}, 20, true
		o.Iceberg = icebergSettings{Enabled: true, Catalog: "sql", URI: dsn, Table: "lake.roles", CommitInterval: time.Hour}
	})
	feed(t, s, iceRecords("t1", 0, 50), 25)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var data, meta int
	for path, key := range keyOf {
		if key == srv.AccessKey {
			t.Errorf("PUT %s signed with the static access_key_id, want the role's credentials", path)
		}
		if strings.Contains(path, "/metadata/") {
			meta++
		} else if strings.HasSuffix(path, ".parquet") {
			data++
		}
	}
	if data == 0 || meta == 0 {
		t.Fatalf("PUTs seen: %d data files, %d metadata files (%v); want both", data, meta, keyOf)
	}
	tb := (&iceHarness{srv: srv, dsn: dsn}).table(t, "roles")
	_, seen := readTable(t, tb)
	wantOnce(t, seen, 50)
}
