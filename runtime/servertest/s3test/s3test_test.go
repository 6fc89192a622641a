package s3test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

func TestStartPutListGet(t *testing.T) {
	s := Start(t)
	ctx := context.Background()
	body := []byte("hello\n")
	for _, k := range []string{"b/two", "a/one"} {
		if _, err := s.Client.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(s.Bucket), Key: aws.String(k), Body: bytes.NewReader(body),
		}); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
	}
	keys := s.Keys(t)
	if len(keys) != 2 || keys[0] != "a/one" || keys[1] != "b/two" {
		t.Fatalf("keys = %v", keys)
	}
	if got := s.MustGet(t, "a/one"); !bytes.Equal(got, body) {
		t.Fatalf("body = %q", got)
	}
	objs, err := s.List(ctx, "b/")
	if err != nil || len(objs) != 1 || objs[0].Size != int64(len(body)) {
		t.Fatalf("list b/ = %v, %v", objs, err)
	}
	s.Close()
	s.Close()
}

// TestMissingBinary runs itself in a child process with a server binary
// that does not exist: under CI=true the test fails with the install
// command, otherwise it is skipped.
func TestMissingBinary(t *testing.T) {
	if os.Getenv("S3TEST_CHILD") == "1" {
		Start(t)
		return
	}
	for _, ci := range []string{"true", ""} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMissingBinary$", "-test.v")
		cmd.Env = append(os.Environ(), "S3TEST_CHILD=1", "PICO_VERSITYGW=/nonexistent/versitygw", "CI="+ci, "PICO_TEST_S3=")
		out, err := cmd.CombinedOutput()
		switch {
		case ci == "true" && (err == nil || !strings.Contains(string(out), "go install github.com/versity/versitygw/cmd/versitygw@v1.8.0")):
			t.Fatalf("CI=true: err=%v\n%s", err, out)
		case ci == "" && (err != nil || !strings.Contains(string(out), "--- SKIP")):
			t.Fatalf("CI unset: err=%v\n%s", err, out)
		}
	}
}
