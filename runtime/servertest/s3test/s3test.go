// Package s3test starts a real S3-compatible server for tests: versitygw by
// default, or MinIO when PICO_TEST_S3=minio and a minio binary is on PATH
// or in <repo>/.tools/bin. StartMinio starts MinIO whatever PICO_TEST_S3
// says, with what only it offers here: a KMS key (SSE-S3, SSE-KMS), TLS
// with a certificate of its own CA (SSE-C), and STS AssumeRole.
//
// The server listens on 127.0.0.1 at a free port, stores its objects in a
// temporary directory, and uses random credentials. New creates one
// bucket; the helpers list and read objects through the AWS SDK.
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/picomq/pico-connectors/runtime/servertest/freeport"
	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
)

// InstallVersitygw is the command that installs the default server binary
// where the tests look for it.
const InstallVersitygw = "GOBIN=<repo>/.tools/bin go install github.com/versity/versitygw/cmd/versitygw@v1.8.0"

// InstallMinio is the command that installs MinIO where the tests look
// for it (make tools does), at the version they are run with.
const InstallMinio = "GOBIN=<repo>/.tools/bin go install github.com/minio/minio@v0.0.0-20260212201848-7aac2a2c5b7c"

// Region is the region label the test server is used with.
const Region = "us-east-1"

// Server is a running S3-compatible server with one bucket.
type Server struct {
	// Kind is "versitygw" or "minio".
	Kind string
	// Endpoint is the base URL, such as http://127.0.0.1:40123.
	Endpoint string
	// Addr is the host:port the server listens on.
	Addr string
	// AccessKey and SecretKey are the server's root credentials.
	AccessKey, SecretKey string
	// Bucket is the bucket New created.
	Bucket string
	// Dir is the server's storage directory.
	Dir string
	// Client is an SDK client for the server, path-style.
	Client *s3.Client
	// KMSKeyID is the KMS key MinIO was started with (StartMinio with
	// KMS), the one SSE-S3 and SSE-KMS use; "" otherwise.
	KMSKeyID string
	// CAFile is the PEM file of the certificate a TLS server (StartMinio
	// with TLS) serves, self-signed: what a client must trust. "" otherwise.
	CAFile string

	cmd     *exec.Cmd
	bin     string // the server binary
	tmp     string // the folder New made, removed at Close
	logs    *runtimebin.Output
	done    chan struct{}
	closeMu sync.Once
}

// ErrNoBinary is returned, wrapped with the command that installs it, by
// New when the server binary is missing.
var ErrNoBinary = errors.New("s3test: no S3 server binary")

// New starts a server keeping its objects under dir (a new temporary
// folder, removed at Close, when dir is ""), waits until it answers, and
// creates a bucket. The caller must Close it. A missing binary is an error
// wrapping ErrNoBinary, naming the command that installs it.
func New(dir string) (*Server, error) { return newServer(dir, "", startConfig{}) }

// NewIAM is New for versitygw with its internal IAM (--iam-dir), so that
// a test can add users (CreateUser) and give them bucket policies. MinIO
// is not offered: it fails with an error.
func NewIAM(dir string) (*Server, error) { return newServer(dir, "", startConfig{iam: true}) }

// MinioOptions are what StartMinio starts MinIO with.
type MinioOptions struct {
	// KMS starts MinIO with a KMS key (MINIO_KMS_SECRET_KEY), named by
	// Server.KMSKeyID, so that it serves SSE-S3 and SSE-KMS.
	KMS bool
	// TLS serves https with a self-signed certificate for 127.0.0.1,
	// written to Server.CAFile; MinIO takes SSE-C only over TLS.
	TLS bool
}

// startConfig is what a server starts with besides its kind.
type startConfig struct {
	iam   bool
	minio MinioOptions
}

func newServer(dir, kind string, cfg startConfig) (*Server, error) {
	iam := cfg.iam
	if kind == "" {
		kind = "versitygw"
		if os.Getenv("PICO_TEST_S3") == "minio" {
			kind = "minio"
		}
	}
	bin, err := findBinary(kind)
	if err != nil {
		return nil, fmt.Errorf("%w: %v; install it with: %s", ErrNoBinary, err, installCommand(kind))
	}
	tmp := ""
	if dir == "" {
		if tmp, err = os.MkdirTemp("", "s3test-"); err != nil {
			return nil, err
		}
		dir = tmp
	}
	if iam && kind != "versitygw" {
		return nil, fmt.Errorf("s3test: users and policies are set up for versitygw only, not %s", kind)
	}
	s, err := start(kind, bin, dir, cfg)
	if err != nil {
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("s3test: %w", err)
	}
	s.tmp = tmp
	bucket := "pico-" + randomHex(6)
	if err := s.CreateBucket(context.Background(), bucket); err != nil {
		s.Close()
		return nil, fmt.Errorf("s3test: create bucket %s: %w\n%s", bucket, err, s.Logs())
	}
	s.Bucket = bucket
	return s, nil
}

// Start is New for a test, in a folder of t.TempDir: the server is
// stopped by t.Cleanup. When the binary is missing the test fails under
// CI=true, with the command that installs it, and is skipped otherwise.
func Start(t testing.TB) *Server {
	t.Helper()
	return startFor(t, "", startConfig{})
}

// StartIAM is NewIAM for a test, as Start is New's.
func StartIAM(t testing.TB) *Server {
	t.Helper()
	return startFor(t, "", startConfig{iam: true})
}

// StartMinio starts MinIO for a test, whatever PICO_TEST_S3 says, with
// opts, as Start does: stopped by t.Cleanup, a missing binary failing
// the test under CI=true (make tools installs it) and skipping it
// otherwise.
func StartMinio(t testing.TB, opts MinioOptions) *Server {
	t.Helper()
	return startFor(t, "minio", startConfig{minio: opts})
}

func startFor(t testing.TB, kind string, cfg startConfig) *Server {
	t.Helper()
	s, err := newServer(t.TempDir(), kind, cfg)
	if errors.Is(err, ErrNoBinary) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	t.Logf("s3test: %s at %s, bucket %s", s.Kind, s.Endpoint, s.Bucket)
	return s
}

func installCommand(kind string) string {
	if kind == "minio" {
		return InstallMinio
	}
	return InstallVersitygw
}

// findBinary locates the server binary: $PICO_VERSITYGW, then
// <repo>/.tools/bin, then PATH. MinIO is looked up on PATH and in
// <repo>/.tools/bin.
func findBinary(kind string) (string, error) {
	if kind == "versitygw" {
		if p := os.Getenv("PICO_VERSITYGW"); p != "" {
			if isExecutable(p) {
				return p, nil
			}
			return "", fmt.Errorf("PICO_VERSITYGW=%s is not an executable file", p)
		}
	}
	if root, ok := repoRoot(); ok {
		p := filepath.Join(root, ".tools", "bin", kind)
		if isExecutable(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath(kind); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s not found in $PICO_VERSITYGW, <repo>/.tools/bin or PATH", kind)
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// repoRoot walks up from the working directory to the folder holding go.mod.
func repoRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

func start(kind, bin, tmp string, cfg startConfig) (*Server, error) {
	dir := filepath.Join(tmp, "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	minioArgs, minioEnv, kmsKey, caFile, err := minioSetup(tmp, cfg.minio)
	if err != nil {
		return nil, err
	}
	var iamArgs []string
	if cfg.iam {
		iamDir, err := filepath.Abs(filepath.Join(tmp, "iam"))
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(iamDir, 0o700); err != nil {
			return nil, err
		}
		iamArgs = []string{"--iam-dir", iamDir}
	}
	// Random credentials: versitygw wants at least a short key; MinIO wants
	// 3+ and 8+ characters.
	access := "PICO" + strings.ToUpper(randomHex(8))
	secret := randomHex(20)
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		addr, err := freeport.Addr()
		if err != nil {
			return nil, err
		}
		var cmd *exec.Cmd
		switch kind {
		case "minio":
			args := append([]string{"server", dir, "--address", addr, "--console-address", "127.0.0.1:0", "--quiet"}, minioArgs...)
			cmd = exec.Command(bin, args...)
			cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+access, "MINIO_ROOT_PASSWORD="+secret,
				"MINIO_BROWSER=off", "MINIO_UPDATE=off")
			cmd.Env = append(cmd.Env, minioEnv...)
		default:
			args := append([]string{"--access", access, "--secret", secret, "--port", addr}, iamArgs...)
			cmd = exec.Command(bin, append(args, "posix", dir)...)
			cmd.Env = os.Environ()
		}
		logs := &runtimebin.Output{Limit: 1 << 20} // the last megabyte or so
		cmd.Stdout = logs
		cmd.Stderr = logs
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start %s: %w", bin, err)
		}
		scheme := "http://"
		if caFile != "" {
			scheme = "https://"
		}
		s := &Server{
			Kind: kind, Endpoint: scheme + addr, Addr: addr, bin: bin,
			AccessKey: access, SecretKey: secret, Dir: dir,
			KMSKeyID: kmsKey, CAFile: caFile,
			cmd: cmd, logs: logs, done: make(chan struct{}),
		}
		go func() { _ = cmd.Wait(); close(s.done) }()
		if s.Client, err = NewClientCA(s.Endpoint, access, secret, caFile); err != nil {
			s.Close()
			return nil, err
		}
		if err := s.waitReady(30 * time.Second); err != nil {
			s.Close()
			lastErr = fmt.Errorf("%s did not become ready on %s: %w\n%s", kind, addr, err, logs.String())
			continue // most likely the port was taken in between; try another
		}
		return s, nil
	}
	return nil, lastErr
}

// NewClient returns a path-style SDK client with static credentials for an
// S3-compatible endpoint.
func NewClient(endpoint, access, secret string) *s3.Client {
	return s3.New(s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(access, secret, ""),
	})
}

// NewClientCA is NewClient trusting the certificates of the PEM file
// caFile besides the system's (none more when caFile is "").
func NewClientCA(endpoint, access, secret, caFile string) (*s3.Client, error) {
	c := NewClient(endpoint, access, secret)
	if caFile == "" {
		return c, nil
	}
	hc, err := httpClientCA(caFile)
	if err != nil {
		return nil, err
	}
	return s3.New(c.Options(), func(o *s3.Options) { o.HTTPClient = hc }), nil
}

// PID is the server process's id, for a benchmark that counts the CPU
// time it spends.
func (s *Server) PID() int { return s.cmd.Process.Pid }

func (s *Server) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var err error
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return errors.New("server exited")
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err = s.Client.ListBuckets(ctx, &s3.ListBucketsInput{})
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

// CreateBucket creates a bucket.
func (s *Server) CreateBucket(ctx context.Context, name string) error {
	_, err := s.Client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)})
	return err
}

// CreateUser adds a user with the role "user" to a server NewIAM
// started (versitygw admin create-user): it owns no bucket and may do
// only what bucket policies allow it.
func (s *Server) CreateUser(access, secret string) error {
	out, err := exec.Command(s.bin, "admin", "--access", s.AccessKey, "--secret", s.SecretKey, "--endpoint-url", s.Endpoint,
		"create-user", "--access", access, "--secret", secret, "--role", "user").CombinedOutput()
	if err != nil {
		return fmt.Errorf("versitygw admin create-user: %v\n%s", err, out)
	}
	return nil
}

// Object is one listed object.
type Object struct {
	Key  string
	Size int64
}

// List returns every object in the bucket under prefix, sorted by key.
func (s *Server) List(ctx context.Context, prefix string) ([]Object, error) {
	return s.ListIn(ctx, s.Bucket, prefix)
}

// ListIn returns every object in bucket under prefix, sorted by key.
func (s *Server) ListIn(ctx context.Context, bucket, prefix string) ([]Object, error) {
	var out []Object
	in := &s3.ListObjectsV2Input{Bucket: aws.String(bucket)}
	if prefix != "" {
		in.Prefix = aws.String(prefix)
	}
	p := s3.NewListObjectsV2Paginator(s.Client, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range page.Contents {
			out = append(out, Object{Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Keys returns the keys of every object in the bucket, sorted; the test
// fails on an error.
func (s *Server) Keys(t testing.TB) []string {
	t.Helper()
	objs, err := s.List(context.Background(), "")
	if err != nil {
		t.Fatalf("s3test: list %s: %v", s.Bucket, err)
	}
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i] = o.Key
	}
	return keys
}

// Get returns an object's body.
func (s *Server) Get(ctx context.Context, key string) ([]byte, error) {
	return s.GetIn(ctx, s.Bucket, key)
}

// GetIn returns the body of an object in bucket.
func (s *Server) GetIn(ctx context.Context, bucket, key string) ([]byte, error) {
	out, err := s.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	return io.ReadAll(out.Body)
}

// MustGet returns an object's body; the test fails on an error.
func (s *Server) MustGet(t testing.TB, key string) []byte {
	t.Helper()
	b, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("s3test: get %s: %v", key, err)
	}
	return b
}

// Logs returns what the server printed so far.
func (s *Server) Logs() string { return s.logs.String() }

// Close stops the server, and removes the folder New made for it. It is
// safe to call more than once.
func (s *Server) Close() {
	s.closeMu.Do(func() {
		if s.cmd.Process != nil {
			_ = s.cmd.Process.Signal(os.Interrupt)
			select {
			case <-s.done:
			case <-time.After(5 * time.Second):
				_ = s.cmd.Process.Kill()
				<-s.done
			}
		}
		if s.tmp != "" {
			_ = os.RemoveAll(s.tmp)
		}
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
