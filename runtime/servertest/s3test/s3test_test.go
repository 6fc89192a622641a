package s3test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
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

// TestMinioVersionPinned: make tools installs the MinIO version the
// install command names.
func TestMinioVersionPinned(t *testing.T) {
	root, ok := repoRoot()
	if !ok {
		t.Fatal("no go.mod above the working directory")
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	_, version, _ := strings.Cut(InstallMinio, "@")
	if version == "" || !strings.Contains(string(mk), "MINIO_VERSION := "+version+"\n") {
		t.Fatalf("the Makefile's MINIO_VERSION is not %q, the version of InstallMinio", version)
	}
}

// TestStartMinioTLSAndKMS: StartMinio with TLS serves https with the
// certificate in CAFile, which the server's Client trusts, and with KMS
// encrypts an object with SSE-KMS under KMSKeyID.
func TestStartMinioTLSAndKMS(t *testing.T) {
	s := StartMinio(t, MinioOptions{TLS: true, KMS: true})
	if !strings.HasPrefix(s.Endpoint, "https://") || s.CAFile == "" || s.KMSKeyID == "" {
		t.Fatalf("endpoint %s, CA file %q, KMS key %q", s.Endpoint, s.CAFile, s.KMSKeyID)
	}
	ctx := context.Background()
	out, err := s.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String("k"),
		Body: strings.NewReader("x"), ServerSideEncryption: types.ServerSideEncryptionAwsKms, SSEKMSKeyId: aws.String(s.KMSKeyID)})
	if err != nil {
		t.Fatal(err)
	}
	if out.ServerSideEncryption != types.ServerSideEncryptionAwsKms {
		t.Fatalf("encryption = %q", out.ServerSideEncryption)
	}
	// A client that does not trust the certificate is refused.
	if _, err := NewClient(s.Endpoint, s.AccessKey, s.SecretKey).ListBuckets(ctx, &s3.ListBucketsInput{}); err == nil {
		t.Fatal("a client without the CA file reached the TLS server")
	}
}
