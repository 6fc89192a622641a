package s3sink

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/picomq/pico-connectors/generated/s3sinkconfig"
	"github.com/picomq/pico-connectors/internal/testwait"
	"github.com/picomq/pico-connectors/runtime/servertest/faultproxy"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/sdk"
)

// sseKey is an SSE-C key: the base64 of 32 random bytes.
func sseKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// TestObjectSettingsRefused: validate (the registration's Load) refuses
// contradictory object settings and role keys, naming the keys, and never
// shows the SSE-C key.
func TestObjectSettingsRefused(t *testing.T) {
	key := sseKey(t)
	reg, _ := sdk.Lookup(s3sinkconfig.Path)
	cases := []struct {
		name string
		set  map[string]any
		want string
	}{
		{"kms key without kms", map[string]any{"kms_key_id": "my-key"},
			"kms_key_id is set but server_side_encryption is 'none'"},
		{"kms key with AES256", map[string]any{"kms_key_id": "my-key", "server_side_encryption": "AES256"},
			"kms_key_id is set but server_side_encryption is 'AES256'"},
		{"context without kms", map[string]any{"kms_encryption_context": map[string]any{"team": "data"}},
			"kms_encryption_context is set but server_side_encryption is 'none'"},
		{"SSE-C with SSE-S3", map[string]any{"sse_customer_key": key, "server_side_encryption": "AES256", "endpoint": "https://127.0.0.1:9000"},
			"server_side_encryption 'AES256' cannot be combined with sse_customer_key"},
		{"SSE-C key too short", map[string]any{"sse_customer_key": base64.StdEncoding.EncodeToString([]byte("short")), "endpoint": "https://127.0.0.1:9000"},
			"sse_customer_key must be the base64 of a 32-byte key"},
		{"SSE-C key not base64", map[string]any{"sse_customer_key": strings.Repeat("!", 43) + "=", "endpoint": "https://127.0.0.1:9000"},
			"sse_customer_key must be the base64 of a 32-byte key"},
		{"SSE-C over http", map[string]any{"sse_customer_key": key, "endpoint": "http://127.0.0.1:9000"},
			"sse_customer_key needs an https endpoint, not 'http://127.0.0.1:9000'"},
		{"eleven tags", map[string]any{"tags": map[string]any{"a": "1", "b": "2", "c": "3", "d": "4", "e": "5", "f": "6", "g": "7", "h": "8", "i": "9", "j": "10", "k": "11"}},
			"tags: S3 allows at most 10 tags on an object"},
		{"reserved tag", map[string]any{"tags": map[string]any{"aws:team": "x"}},
			"tags: key 'aws:team' is reserved"},
		{"tag value with &", map[string]any{"tags": map[string]any{"team": "data & ops"}},
			"tags: the value of 'team' has a character S3 refuses"},
		{"unknown checksum", map[string]any{"checksum_algorithm": "MD5"}, `checksum_algorithm: must be one of "CRC32C", "CRC32", "SHA1", "SHA256", got "MD5"`},
		{"external id without role", map[string]any{"external_id": "x"},
			"external_id is set but role_arn is not"},
		{"sts endpoint without role", map[string]any{"sts_endpoint": "http://127.0.0.1:9000"},
			"sts_endpoint is set but role_arn is not"},
		{"policy not JSON", map[string]any{"role_arn": "arn:aws:iam::123456789012:role/r", "role_session_policy": "{"},
			"role_session_policy is not valid JSON"},
		{"not a role ARN", map[string]any{"role_arn": "my-role"}, "role_arn 'my-role' is not a role ARN"},
		{"role too short", map[string]any{"role_arn": "arn:aws:iam::123456789012:role/r", "role_duration": "5m"},
			"role_duration (5m) must be at least 15m"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw := map[string]any{"bucket": "picomq-archive", "region": "eu-west-1"}
			for k, v := range c.set {
				raw[k] = v
			}
			_, err := reg.Load(raw, envPrefix, noEnv)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Load = %v; want an error containing %q", err, c.want)
			}
			if strings.Contains(err.Error(), key) {
				t.Fatalf("the error shows the SSE-C key: %v", err)
			}
		})
	}
	// What goes together loads.
	_, err := reg.Load(map[string]any{"bucket": "picomq-archive", "region": "eu-west-1",
		"server_side_encryption": "aws:kms", "kms_key_id": "my-key", "kms_encryption_context": map[string]any{"team": "data"},
		"storage_class": "STANDARD_IA", "acl": "bucket-owner-full-control", "tags": map[string]any{"team": "data"},
		"checksum_algorithm": "sha256", "role_arn": "arn:aws:iam::123456789012:role/r", "external_id": "x",
	}, envPrefix, noEnv)
	if err != nil {
		t.Fatalf("Load of settings that go together: %v", err)
	}
}

// TestObjectSettingsHeaders: the headers are what S3 documents: the
// context as base64 JSON, the SSE-C key's MD5, the tags as a sorted query.
func TestObjectSettingsHeaders(t *testing.T) {
	raw := []byte("0123456789abcdef0123456789abcdef")
	o := objectSettings{SSECKey: base64.StdEncoding.EncodeToString(raw), Tags: map[string]string{"team": "data & ops", "env": "prod"},
		KMSContext: map[string]string{"b": "2", "a": "1"}}
	alg, _, md5 := o.sseCustomer()
	if *alg != "AES256" || *md5 != "hRasmdxgYDKV3nvbahU1MA==" {
		t.Fatalf("SSE-C = %s, MD5 %s", *alg, *md5)
	}
	if got := o.tagging(); got != "env=prod&team=data+%26+ops" {
		t.Fatalf("tagging = %s", got)
	}
	if got, _ := base64.StdEncoding.DecodeString(o.kmsContext()); string(got) != `{"a":"1","b":"2"}` {
		t.Fatalf("context = %s", got)
	}
}

// writeFiles opens a sink on srv with mod, writes 30 records of topic t1
// (three files of 10) and closes it; it returns the keys under mod's
// prefix.
func writeFiles(t *testing.T, srv *s3test.Server, mod func(*options)) []string {
	t.Helper()
	var prefix string
	s, err := openWith(t, srv, nil, func(o *options) {
		o.CAFile = srv.CAFile
		messages(10)(o)
		mod(o)
		prefix = o.Prefix
	})
	if err != nil {
		t.Fatalf("Open: %v\n%s", err, srv.Logs())
	}
	if err := s.Consume(context.Background(), records("t1", 0, 30)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	objs, err := srv.List(context.Background(), prefix+"/")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	if len(keys) != 3 {
		t.Fatalf("objects = %v; want 3 files", keys)
	}
	return keys
}

func head(t *testing.T, srv *s3test.Server, key string, mod func(*s3.HeadObjectInput)) *s3.HeadObjectOutput {
	t.Helper()
	in := &s3.HeadObjectInput{Bucket: aws.String(srv.Bucket), Key: aws.String(key)}
	if mod != nil {
		mod(in)
	}
	out, err := srv.Client.HeadObject(context.Background(), in)
	if err != nil {
		t.Fatalf("HeadObject %s: %v", key, err)
	}
	return out
}

// TestServerSideEncryptionMinio: against MinIO with a KMS key, every file
// is stored with SSE-S3 (AES256), or with SSE-KMS under kms_key_id.
func TestServerSideEncryptionMinio(t *testing.T) {
	srv := s3test.StartMinio(t, s3test.MinioOptions{KMS: true})
	for _, k := range writeFiles(t, srv, func(o *options) { o.Prefix = "s3"; o.Object.SSE = "AES256" }) {
		if h := head(t, srv, k, nil); h.ServerSideEncryption != types.ServerSideEncryptionAes256 {
			t.Fatalf("%s: server-side encryption %q; want AES256", k, h.ServerSideEncryption)
		}
	}
	keys := writeFiles(t, srv, func(o *options) {
		o.Prefix = "kms"
		o.Object.SSE, o.Object.KMSKeyID = "aws:kms", srv.KMSKeyID
		o.Object.KMSContext = map[string]string{"team": "data"}
	})
	for _, k := range keys {
		h := head(t, srv, k, nil)
		if h.ServerSideEncryption != types.ServerSideEncryptionAwsKms || !strings.HasSuffix(aws.ToString(h.SSEKMSKeyId), srv.KMSKeyID) {
			t.Fatalf("%s: server-side encryption %q, key %q; want aws:kms with %s", k, h.ServerSideEncryption, aws.ToString(h.SSEKMSKeyId), srv.KMSKeyID)
		}
	}
	if got := string(srv.MustGet(t, keys[0])); got != lines("t1", 0, 10) {
		t.Fatalf("%s reads back as %q", keys[0], got)
	}
	// check names the encryption and writes the probe object with it; a
	// KMS key MinIO does not have fails both.
	for _, c := range []struct {
		kmsKey, want string
		ok           bool
	}{{srv.KMSKeyID, "aws:kms with kms_key_id " + srv.KMSKeyID + ", the probe object written with it", true},
		{"no-such-key", "aws:kms with kms_key_id no-such-key: the probe object was refused (see PutObject (probe object))", false}} {
		o := defaultOptions()
		o.Bucket, o.Region, o.Endpoint, o.PathStyle = srv.Bucket, s3test.Region, srv.Endpoint, true
		o.AccessKeyID, o.SecretAccessKey = srv.AccessKey, srv.SecretKey
		o.Object.SSE, o.Object.KMSKeyID = "aws:kms", c.kmsKey
		var row sdk.Check
		for _, ch := range newSink(o, sinkEnv("t", sdk.DiscardMetrics)).Check(context.Background()) {
			if ch.Name == checkEncryption {
				row = ch
			}
		}
		if got := row.Detail + row.Problem; got != c.want || (row.Problem == "") != c.ok {
			t.Fatalf("check's encryption row = %+v; want %q", row, c.want)
		}
	}
}

// TestSSECustomerKeyMinio: with sse_customer_key, against MinIO over TLS
// (its own CA, trusted through ca_file), a GET without the key fails, and
// one with it (or with another key) reads the object (or fails).
func TestSSECustomerKeyMinio(t *testing.T) {
	srv := s3test.StartMinio(t, s3test.MinioOptions{TLS: true})
	key := sseKey(t)
	keys := writeFiles(t, srv, func(o *options) { o.Prefix = "ssec"; o.Object.SSECKey = key })
	ctx := context.Background()
	if _, err := srv.Get(ctx, keys[0]); err == nil {
		t.Fatalf("GET %s without the key read it", keys[0])
	}
	get := func(k string) ([]byte, error) {
		o := objectSettings{SSECKey: k}
		in := &s3.GetObjectInput{Bucket: aws.String(srv.Bucket), Key: aws.String(keys[0])}
		in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = o.sseCustomer()
		out, err := srv.Client.GetObject(ctx, in)
		if err != nil {
			return nil, err
		}
		defer out.Body.Close()
		return io.ReadAll(out.Body)
	}
	if _, err := get(sseKey(t)); err == nil {
		t.Fatalf("GET %s with another key read it", keys[0])
	}
	body, err := get(key)
	if err != nil {
		t.Fatalf("GET %s with the key: %v", keys[0], err)
	}
	if string(body) != lines("t1", 0, 10) {
		t.Fatalf("%s reads back as %q", keys[0], body)
	}
	// The sink's own reads are listings, which need no key; a listing
	// after a restart finds the files, so a replay skips them.
	s, err := openWith(t, srv, nil, func(o *options) {
		o.CAFile, o.Prefix, o.Object.SSECKey = srv.CAFile, "ssec", key
		messages(10)(o)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Consume(ctx, records("t1", 0, 30)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var ae interface{ ErrorCode() string }
	_, err = srv.Get(ctx, keys[1])
	if !errors.As(err, &ae) {
		t.Fatalf("GET without the key after the replay: %v", err)
	}
}

// prefixPolicy is a session policy that allows the sink's calls only under
// prefix (and the probe object), for AssumeRole's Policy.
func prefixPolicy(bucket, prefix string) string {
	return `{"Version":"2012-10-17","Statement":[
{"Effect":"Allow","Action":["s3:PutObject","s3:DeleteObject","s3:GetObject"],"Resource":["arn:aws:s3:::` + bucket + `/` + prefix + `/*","arn:aws:s3:::` + bucket + `/` + ProbeKey + `"]},
{"Effect":"Allow","Action":["s3:ListBucket"],"Resource":["arn:aws:s3:::` + bucket + `"],"Condition":{"StringLike":{"s3:prefix":["` + prefix + `/*"]}}}]}`
}

// TestAssumeRoleMinio: with role_arn the sink writes through MinIO's STS
// AssumeRole (on the S3 endpoint), narrowed by role_session_policy to the
// prefix: the files land under it, and the same credentials cannot write
// outside it.
func TestAssumeRoleMinio(t *testing.T) {
	srv := s3test.StartMinio(t, s3test.MinioOptions{})
	role := func(o *options) {
		o.Prefix = "lake"
		o.Role.ARN = "arn:minio:iam:::role/pico-sink"
		o.Role.SessionPolicy = prefixPolicy(srv.Bucket, "lake")
	}
	keys := writeFiles(t, srv, role)
	if got := string(srv.MustGet(t, keys[0])); got != lines("t1", 0, 10) {
		t.Fatalf("%s reads back as %q", keys[0], got)
	}

	// The credentials the sink signs with are the role's.
	o := defaultOptions()
	o.Region, o.Endpoint, o.PathStyle = s3test.Region, srv.Endpoint, true
	o.AccessKeyID, o.SecretAccessKey = srv.AccessKey, srv.SecretKey
	role(&o)
	client, err := newClient(context.Background(), &o)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := client.Options().Credentials.Retrieve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if creds.AccessKeyID == srv.AccessKey || creds.SessionToken == "" || !creds.CanExpire {
		t.Fatalf("credentials = %s with token %t, expiring %t; want temporary ones of the role", creds.AccessKeyID, creds.SessionToken != "", creds.CanExpire)
	}
	put := func(key string) error {
		_, err := client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(srv.Bucket), Key: aws.String(key), Body: strings.NewReader("x")})
		return err
	}
	if err := put("lake/inside.txt"); err != nil {
		t.Fatalf("a write under the prefix: %v", err)
	}
	if err := put("elsewhere/outside.txt"); errorCode(err) != "AccessDenied" {
		t.Fatalf("a write outside the prefix = %v; want AccessDenied", err)
	}

	// A sink under another prefix opens (the probe object is allowed),
	// and its files are refused (buffered: exactly_once is refused its
	// listing first).
	s, err := openWith(t, srv, nil, func(o *options) {
		role(o)
		o.Prefix = "other"
		o.Buffered = true
		o.MaxAttempts = 1
		messages(10)(o)
	})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := s.Consume(context.Background(), records("t1", 0, 5)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); errorCode(err) != "AccessDenied" {
		t.Fatalf("Close of a sink writing outside the prefix = %v; want AccessDenied", err)
	}
}

// TestCheckNamesTheRole: when AssumeRole fails (here MinIO refuses the
// keys it is called with), check's credentials row says so, naming
// role_arn, and shows no secret.
func TestCheckNamesTheRole(t *testing.T) {
	srv := s3test.StartMinio(t, s3test.MinioOptions{})
	o := defaultOptions()
	o.Bucket, o.Region, o.Endpoint, o.PathStyle = srv.Bucket, s3test.Region, srv.Endpoint, true
	o.AccessKeyID, o.SecretAccessKey = srv.AccessKey, "not-the-secret"
	o.Role.ARN = "arn:minio:iam:::role/pico-sink"
	checks := newSink(o, sinkEnv("t", sdk.DiscardMetrics)).Check(context.Background())
	if len(checks) != 1 || checks[0].Name != checkCredentials ||
		!strings.HasPrefix(checks[0].Problem, "assuming role_arn 'arn:minio:iam:::role/pico-sink' failed: ") ||
		!strings.Contains(checks[0].Fix, "sts:AssumeRole") || strings.Contains(checks[0].Problem, "not-the-secret") {
		t.Fatalf("checks = %+v", checks)
	}
}

// TestAssumedRoleRenewed: the assumed role's credentials are renewed when
// they come near their expiry, and the sink goes on writing with the new
// ones, without a restart.
func TestAssumedRoleRenewed(t *testing.T) {
	srv := s3test.StartMinio(t, s3test.MinioOptions{})
	// 15-minute credentials (STS's minimum) count as expired 2s after
	// they are issued.
	window := roleExpiryWindow
	roleExpiryWindow = 15*time.Minute - 2*time.Second
	t.Cleanup(func() { roleExpiryWindow = window })
	s, err := openWith(t, srv, nil, func(o *options) {
		o.Prefix = "lake"
		o.Role.ARN, o.Role.Duration = "arn:minio:iam:::role/pico-sink", 15*time.Minute
		o.Role.SessionPolicy = prefixPolicy(srv.Bucket, "lake")
		messages(10)(o)
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	creds := func() aws.Credentials {
		c, err := s.client.Options().Credentials.Retrieve(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if err := s.Consume(ctx, records("t1", 0, 10)); err != nil {
		t.Fatal(err)
	}
	s.settle()
	first := creds()
	testwait.For(t, 10*time.Second, "the first credentials to come within the expiry window", func() bool {
		return time.Now().After(first.Expires) // the cache moved Expires back by the window
	})
	if err := s.Consume(ctx, records("t1", 10, 20)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close after the renewal: %v", err)
	}
	if second := creds(); second.AccessKeyID == first.AccessKeyID {
		t.Fatalf("credentials not renewed: %s both times", first.AccessKeyID)
	}
	if objs, _ := srv.List(ctx, "lake/"); len(objs) != 3 {
		t.Fatalf("objects = %v; want 3 files", objs)
	}
}

// checkObjectSettings reads back what tags, checksum_algorithm and
// storage_class (when not "") put on every file.
func checkObjectSettings(t *testing.T, srv *s3test.Server, storageClass string) {
	t.Helper()
	ctx := context.Background()
	keys := writeFiles(t, srv, func(o *options) {
		o.Prefix = "settings"
		o.Object.Tags = map[string]string{"team": "data/ops + ml", "retention": "90d"}
		o.Object.StorageClass = storageClass
		o.Object.Checksum = "SHA256"
	})
	for _, k := range keys {
		tags, err := srv.Client.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(srv.Bucket), Key: aws.String(k)})
		if err != nil {
			t.Fatalf("GetObjectTagging %s: %v", k, err)
		}
		got := map[string]string{}
		for _, tag := range tags.TagSet {
			got[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
		}
		if len(got) != 2 || got["team"] != "data/ops + ml" || got["retention"] != "90d" {
			t.Fatalf("%s: tags %v", k, got)
		}
		h := head(t, srv, k, func(in *s3.HeadObjectInput) { in.ChecksumMode = types.ChecksumModeEnabled })
		if storageClass != "" && string(h.StorageClass) != storageClass {
			t.Fatalf("%s: storage class %q; want %s", k, h.StorageClass, storageClass)
		}
		if aws.ToString(h.ChecksumSHA256) == "" || aws.ToString(h.ChecksumCRC32) != "" {
			t.Fatalf("%s: checksums SHA256 %q, CRC32 %q; want SHA256 only", k, aws.ToString(h.ChecksumSHA256), aws.ToString(h.ChecksumCRC32))
		}
	}
}

// TestObjectSettingsVersitygw: tags and checksum read back from
// versitygw (which reports every object as STANDARD).
func TestObjectSettingsVersitygw(t *testing.T) {
	checkObjectSettings(t, s3test.Start(t), "")
}

// TestStorageClassMinio: MinIO keeps the storage class (and the tags and
// checksum).
func TestStorageClassMinio(t *testing.T) {
	checkObjectSettings(t, s3test.StartMinio(t, s3test.MinioOptions{}), "REDUCED_REDUNDANCY")
}

// TestEncryptionOnlyPolicy: under a policy that allows only encrypted
// writes (here the assumed role's session policy, which MinIO evaluates
// as it would a bucket policy), the probe object and the .lost markers
// carry server_side_encryption too: a sink without it cannot open, and
// one with it writes the marker of a file the policy refuses.
func TestEncryptionOnlyPolicy(t *testing.T) {
	srv := s3test.StartMinio(t, s3test.MinioOptions{KMS: true})
	// Encrypted writes of the probe object and of markers; data files
	// are refused, so that the buffered sink writes a marker.
	policy := `{"Version":"2012-10-17","Statement":[
{"Effect":"Allow","Action":["s3:PutObject"],"Resource":["arn:aws:s3:::` + srv.Bucket + `/` + ProbeKey + `","arn:aws:s3:::` + srv.Bucket + `/*.lost"],
 "Condition":{"StringEquals":{"s3:x-amz-server-side-encryption":"AES256"}}},
{"Effect":"Allow","Action":["s3:DeleteObject"],"Resource":["arn:aws:s3:::` + srv.Bucket + `/*"]}]}`
	mod := func(sse string) func(*options) {
		return func(o *options) {
			o.Prefix, o.Buffered, o.MaxAttempts = "enc", true, 1
			o.Role.ARN, o.Role.SessionPolicy = "arn:minio:iam:::role/pico-sink", policy
			o.Object.SSE = sse
			messages(10)(o)
		}
	}
	if _, err := openWith(t, srv, nil, mod("")); err == nil || errorCode(errors.Unwrap(err)) != "AccessDenied" {
		t.Fatalf("Open without encryption = %v; want the probe object refused", err)
	}
	s, err := openWith(t, srv, nil, mod("AES256"))
	if err != nil {
		t.Fatalf("Open with encryption: %v", err)
	}
	ctx := context.Background()
	if err := s.Consume(ctx, records("t1", 0, 10)); errorCode(err) != "AccessDenied" {
		t.Fatalf("Consume = %v; want the data file refused", err)
	}
	_ = s.Close(ctx)
	marker := key("enc/t1", 0, 9, "jsonl") + LostSuffix
	if h := head(t, srv, marker, nil); h.ServerSideEncryption != types.ServerSideEncryptionAes256 {
		t.Fatalf("%s: server-side encryption %q; want AES256", marker, h.ServerSideEncryption)
	}
}

// TestFromConfigObjectSettings: the keys reach the options, aliases
// resolved, and the SSE-C key (here from the environment) stays hidden.
func TestFromConfigObjectSettings(t *testing.T) {
	key := sseKey(t)
	env := func(name string) (string, bool) {
		if name == envPrefix+"SSE_CUSTOMER_KEY" {
			return key, true
		}
		return "", false
	}
	cfg, err := s3sinkconfig.Load(map[string]any{"bucket": "picomq-archive", "region": "eu-west-1", "endpoint": "https://s3.internal:9000",
		"storage_class": "STANDARD_IA", "acl": "bucket-owner-full-control", "tags": map[string]any{"team": "data"},
		"checksum_algorithm": "crc32c", "role_arn": "arn:aws:iam::123456789012:role/r", "external_id": "x", "role_duration": "2h",
		"sts_endpoint": "https://sts.internal", "ca_file": "/etc/ca.pem",
	}, envPrefix, env)
	if err != nil {
		t.Fatal(err)
	}
	o := fromConfig(cfg)
	want := objectSettings{SSECKey: key, StorageClass: "STANDARD_IA", ACL: "bucket-owner-full-control", Tags: map[string]string{"team": "data"}, Checksum: "CRC32C"}
	if fmt.Sprint(o.Object) != fmt.Sprint(want) {
		t.Fatalf("object settings = %+v; want %+v", o.Object, want)
	}
	wantRole := roleSettings{ARN: "arn:aws:iam::123456789012:role/r", ExternalID: "x", SessionName: "pico-connectors", Duration: 2 * time.Hour, STSEndpoint: "https://sts.internal"}
	if o.Role != wantRole || o.CAFile != "/etc/ca.pem" {
		t.Fatalf("role = %+v, ca_file %q", o.Role, o.CAFile)
	}
	if strings.Contains(fmt.Sprint(cfg.Redacted()), key) || strings.Contains(fmt.Sprint(cfg), key) {
		t.Fatal("sse_customer_key not redacted")
	}
	// aws:kms (through its alias sse-kms) with a key id and a context.
	cfg, err = s3sinkconfig.Load(map[string]any{"bucket": "picomq-archive", "region": "eu-west-1", "server_side_encryption": "sse-kms",
		"kms_key_id": "alias/lake", "kms_encryption_context": map[string]any{"team": "data"}}, envPrefix, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if o := fromConfig(cfg).Object; o.SSE != "aws:kms" || o.KMSKeyID != "alias/lake" || o.KMSContext["team"] != "data" {
		t.Fatalf("object settings = %+v", o)
	}
}

// TestSettingsOnEveryPut: behind a proxy that refuses, as a bucket policy
// would, every PUT without acl = bucket-owner-full-control and aws:kms:dsse
// with the key (headers versitygw and MinIO take but do not show back),
// the probe object, the data files and a .lost marker all get through.
func TestSettingsOnEveryPut(t *testing.T) {
	srv := s3test.Start(t)
	proxy := faultproxy.Start(t, srv.Endpoint)
	denied := faultproxy.Fault{Status: http.StatusForbidden, Body: []byte(fmt.Sprintf(s3Error, "AccessDenied", "policy"))}
	proxy.InjectMatching(func(r *http.Request) bool {
		return r.Method == http.MethodPut && r.URL.Query().Get("x-id") == "PutObject" &&
			(r.Header.Get("x-amz-acl") != "bucket-owner-full-control" ||
				r.Header.Get("x-amz-server-side-encryption") != "aws:kms:dsse" ||
				r.Header.Get("x-amz-server-side-encryption-aws-kms-key-id") != "lake-key")
	}, -1, denied)
	mod := func(o *options) {
		o.Endpoint, o.Prefix, o.Buffered, o.MaxAttempts = proxy.URL, "put", true, 1
		o.Object.ACL, o.Object.SSE, o.Object.KMSKeyID = "bucket-owner-full-control", "aws:kms:dsse", "lake-key"
		messages(10)(o)
	}
	if _, err := openWith(t, srv, nil, func(o *options) { mod(o); o.Object.ACL = "" }); err == nil {
		t.Fatal("Open without the acl passed the policy")
	}
	s, err := openWith(t, srv, nil, mod)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	ctx := context.Background()
	if err := s.Consume(ctx, records("t1", 0, 20)); err != nil {
		t.Fatal(err)
	}
	// The next data file fails (a 500 the policy does not make), so
	// buffered delivery writes its marker.
	proxy.InjectMatching(func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, ".jsonl") }, 1,
		faultproxy.Fault{Status: http.StatusInternalServerError, Body: []byte(fmt.Sprintf(s3Error, "InternalError", "boom"))})
	if err := s.Consume(ctx, records("t1", 20, 10)); err == nil {
		t.Fatal("Consume after the failed file returned no error")
	}
	_ = s.Close(ctx)
	want := []string{key("put/t1", 0, 9, "jsonl"), key("put/t1", 10, 19, "jsonl"), key("put/t1", 20, 29, "jsonl") + LostSuffix}
	objs, err := srv.List(ctx, "put/")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.Key)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("objects = %v; want %v", got, want)
	}
}
