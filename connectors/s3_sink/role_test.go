package s3sink

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/runtime/servertest/faultproxy"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
)

// TestAssumeRoleParameters: external_id, role_session_name and
// role_duration reach MinIO's STS AssumeRole (at sts_endpoint, here a
// proxy in front of MinIO that notes each AssumeRole form), which issues
// credentials the sink then writes with.
func TestAssumeRoleParameters(t *testing.T) {
	srv := s3test.StartMinio(t, s3test.MinioOptions{})
	proxy := faultproxy.Start(t, srv.Endpoint)
	var mu sync.Mutex
	var forms []url.Values
	proxy.InjectMatching(func(r *http.Request) bool {
		if r.Method != http.MethodPost || r.Body == nil {
			return false
		}
		body, err := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body)) // forwarded as it came
		if form, _ := url.ParseQuery(string(body)); err == nil && form.Get("Action") == "AssumeRole" {
			mu.Lock()
			forms = append(forms, form)
			mu.Unlock()
		}
		return false
	}, -1, faultproxy.Fault{})
	keys := writeFiles(t, srv, func(o *options) {
		o.Prefix = "lake"
		o.Role.ARN = "arn:minio:iam:::role/pico-sink"
		o.Role.STSEndpoint = proxy.URL
		o.Role.ExternalID, o.Role.SessionName, o.Role.Duration = "lake-ext-7", "pico-lake-test", 20*time.Minute
	})
	if len(keys) == 0 {
		t.Fatal("no file written")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(forms) == 0 {
		t.Fatal("no AssumeRole call went through sts_endpoint")
	}
	f := forms[0]
	for k, want := range map[string]string{"RoleArn": "arn:minio:iam:::role/pico-sink", "ExternalId": "lake-ext-7", "RoleSessionName": "pico-lake-test", "DurationSeconds": "1200"} {
		if got := f.Get(k); got != want {
			t.Errorf("AssumeRole %s = %q; want %q (form %v)", k, got, want, f)
		}
	}
}
