package s3sink

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/picomq/pico-connectors/runtime/confkit"
)

// Object settings: the encryption, storage class, ACL, tags and checksum
// every object the sink writes carries (data files, .lost markers, the
// probe object), so that a bucket policy that requires them accepts each.

// objectSettings are server_side_encryption and the keys after it, as
// configured; "" is unset (server_side_encryption = none is "").
type objectSettings struct {
	SSE        string // AES256, aws:kms or aws:kms:dsse
	KMSKeyID   string
	KMSContext map[string]string
	// SSECKey is sse_customer_key: the base64 of a 32-byte key.
	SSECKey      string
	StorageClass string
	ACL          string
	Tags         map[string]string
	Checksum     string // CRC32C, CRC32, SHA1 or SHA256
}

// maxTags is S3's limit of tags on one object.
const maxTags = 10

// tagText is what S3 accepts in a tag's key and value.
var tagText = regexp.MustCompile(`^[\p{L}\p{Z}\p{N}_.:/=+\-@]*$`)

// validate checks what the schema cannot state: the keys that only go
// with aws:kms, the SSE-C key's decoded length and its transport, and the
// tags' limits. endpoint is the sink's endpoint key.
func (o *objectSettings) validate(endpoint string) error {
	if !strings.HasPrefix(o.SSE, "aws:kms") {
		sse := o.SSE
		if sse == "" {
			sse = "none"
		}
		if o.KMSKeyID != "" {
			return fmt.Errorf("kms_key_id is set but server_side_encryption is '%s': a KMS key applies only with server_side_encryption = \"aws:kms\" or \"aws:kms:dsse\"", sse)
		}
		if len(o.KMSContext) > 0 {
			return fmt.Errorf("kms_encryption_context is set but server_side_encryption is '%s': an encryption context applies only with server_side_encryption = \"aws:kms\" or \"aws:kms:dsse\"", sse)
		}
	}
	if o.SSECKey != "" {
		if o.SSE != "" {
			return fmt.Errorf("server_side_encryption '%s' cannot be combined with sse_customer_key (SSE-C, a key of your own): remove one of them", o.SSE)
		}
		key, err := base64.StdEncoding.DecodeString(o.SSECKey)
		if err != nil || len(key) != 32 {
			return fmt.Errorf("sse_customer_key must be the base64 of a 32-byte key: 44 characters of A-Z a-z 0-9 + / ending in one =")
		}
		if strings.HasPrefix(strings.ToLower(endpoint), "http://") {
			return fmt.Errorf("sse_customer_key needs an https endpoint, not '%s': the key travels with every request, and S3 stores refuse SSE-C over http", confkit.MaskURL(endpoint))
		}
	}
	if len(o.Tags) > maxTags {
		return fmt.Errorf("tags has %d entries: S3 allows at most %d tags on an object", len(o.Tags), maxTags)
	}
	for _, k := range sortedKeys(o.Tags) {
		switch {
		case k == "" || len(k) > 128:
			return fmt.Errorf("tags: key '%s' must be 1 to 128 characters", k)
		case strings.HasPrefix(strings.ToLower(k), "aws:"):
			return fmt.Errorf("tags: key '%s' is reserved: S3 refuses tag keys starting with aws:", k)
		case len(o.Tags[k]) > 256:
			return fmt.Errorf("tags: the value of '%s' is longer than S3's 256 characters", k)
		case !tagText.MatchString(k):
			return fmt.Errorf("tags: key '%s' has a character S3 refuses in tags: use letters, digits, spaces and _ . : / = + - @", k)
		case !tagText.MatchString(o.Tags[k]):
			return fmt.Errorf("tags: the value of '%s' has a character S3 refuses in tags: use letters, digits, spaces and _ . : / = + - @", k)
		}
	}
	return nil
}

// describe says which encryption the objects get, for check's row.
func (o *objectSettings) describe() string {
	switch {
	case o.SSECKey != "":
		return "SSE-C (sse_customer_key)"
	case o.SSE == "":
		return "no encryption settings: the bucket's default encryption applies"
	case o.KMSKeyID != "":
		return o.SSE + " with kms_key_id " + o.KMSKeyID
	}
	return o.SSE
}

// putObject sets the settings on a PutObject request.
func (o *objectSettings) putObject(in *s3.PutObjectInput) {
	setIf(&in.ServerSideEncryption, o.SSE)
	if o.KMSKeyID != "" {
		in.SSEKMSKeyId = aws.String(o.KMSKeyID)
	}
	if len(o.KMSContext) > 0 {
		in.SSEKMSEncryptionContext = aws.String(o.kmsContext())
	}
	if o.SSECKey != "" {
		in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = o.sseCustomer()
	}
	setIf(&in.StorageClass, o.StorageClass)
	setIf(&in.ACL, o.ACL)
	if len(o.Tags) > 0 {
		in.Tagging = aws.String(o.tagging())
	}
	setIf(&in.ChecksumAlgorithm, o.Checksum)
}

// setIf sets the request header *dst to v when v is set; unset, it is left
// as it was.
func setIf[T ~string](dst *T, v string) {
	if v != "" {
		*dst = T(v)
	}
}

// createMultipart returns the CreateMultipartUpload of the object put
// would write: its key, content headers and every setting putObject set.
// Without checksum_algorithm the parts carry CRC32, as the SDK's PutObject
// does by default.
func createMultipart(put *s3.PutObjectInput) *s3.CreateMultipartUploadInput {
	in := &s3.CreateMultipartUploadInput{
		Bucket: put.Bucket, Key: put.Key, ContentType: put.ContentType, ContentEncoding: put.ContentEncoding,
		ServerSideEncryption: put.ServerSideEncryption, SSEKMSKeyId: put.SSEKMSKeyId, SSEKMSEncryptionContext: put.SSEKMSEncryptionContext,
		SSECustomerAlgorithm: put.SSECustomerAlgorithm, SSECustomerKey: put.SSECustomerKey, SSECustomerKeyMD5: put.SSECustomerKeyMD5,
		StorageClass: put.StorageClass, ACL: put.ACL, Tagging: put.Tagging, ChecksumAlgorithm: put.ChecksumAlgorithm,
	}
	if in.ChecksumAlgorithm == "" {
		in.ChecksumAlgorithm = types.ChecksumAlgorithmCrc32
	}
	return in
}

// sseCustomer returns the SSE-C headers: the algorithm, the key and the
// base64 of the key's MD5, which the store checks the key against. Every
// request that reads an object written with the key (GetObject,
// HeadObject) must send the same three.
func (o *objectSettings) sseCustomer() (alg, key, keyMD5 *string) {
	raw, _ := base64.StdEncoding.DecodeString(o.SSECKey) // validate checked it
	sum := md5.Sum(raw)
	return aws.String("AES256"), aws.String(o.SSECKey), aws.String(base64.StdEncoding.EncodeToString(sum[:]))
}

// kmsContext is the encryption context as S3 takes it: JSON, in base64.
// json.Marshal sorts the keys, so the header is the same on every write.
func (o *objectSettings) kmsContext() string {
	b, _ := json.Marshal(o.KMSContext) // a map of strings always marshals
	return base64.StdEncoding.EncodeToString(b)
}

// tagging is the x-amz-tagging header: the tags as a URL query, sorted.
func (o *objectSettings) tagging() string {
	v := url.Values{}
	for k, val := range o.Tags {
		v.Set(k, val)
	}
	return v.Encode()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
