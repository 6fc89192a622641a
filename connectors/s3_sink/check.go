package s3sink

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/picomq/pico-connectors/connectors/s3_sink/icetable"
	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/sdk"
)

var _ sdk.Checker = (*Sink)(nil)

// The names of the sink's checks, as pico-connectors check prints them.
const (
	checkCredentials = "credentials"
	checkBucket      = "bucket exists"
	checkRegion      = "region"
	checkPut         = "PutObject (probe object)"
	checkList        = "ListBucket"
	checkEncryption  = "encryption"
	checkTable       = "iceberg table"
)

// credentialCodes are the S3 error codes of credentials the store does not
// accept (as opposed to valid ones that lack a permission).
var credentialCodes = map[string]bool{
	"InvalidAccessKeyId": true, "SignatureDoesNotMatch": true, "InvalidToken": true,
	"ExpiredToken": true, "InvalidClientTokenId": true, "TokenRefreshRequired": true,
}

// regionCodes are the answers of a bucket that lives in another region.
var regionCodes = map[string]bool{
	"PermanentRedirect": true, "AuthorizationHeaderMalformed": true, "IllegalLocationConstraintException": true,
}

// Check tests what the sink needs of the store, with the calls it makes
// when it runs: a listing of the key prefix (the credentials, the bucket,
// s3:ListBucket), the bucket's region, and the probe object Open writes
// and deletes (s3:PutObject, s3:DeleteObject); with table_format =
// "iceberg", the catalog and the table against the definition
// (checkIcebergTable).
func (s *Sink) Check(ctx context.Context) []sdk.Check {
	if err := s.opts.validate(); err != nil {
		return []sdk.Check{sdk.Failed("configuration", err.Error(), "fix the definition (pico-connectors validate lists every problem)")}
	}
	client, err := newClient(ctx, &s.opts)
	if err != nil {
		return []sdk.Check{sdk.Failed(checkCredentials, shown(err), "fix access_key_id and secret_access_key, or the AWS credential chain (AWS_PROFILE, AWS_ACCESS_KEY_ID, an instance role)")}
	}
	bucket := s.opts.Bucket
	lctx, cancel := context.WithTimeout(ctx, s.attemptTimeout(0))
	_, listErr := client.ListObjectsV2(lctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(s.opts.Prefix), MaxKeys: aws.Int32(1)})
	cancel()
	code := errorCode(listErr)
	var out []sdk.Check
	switch {
	case s.opts.Role.ARN != "" && isSTSError(listErr):
		return []sdk.Check{sdk.Failed(checkCredentials, "assuming role_arn '"+s.opts.Role.ARN+"' failed: "+shown(listErr),
			"allow sts:AssumeRole on the role for the sink's credentials (access_key_id or the default chain), let the role's trust policy accept them (and external_id), or fix role_arn and sts_endpoint")}
	case listErr != nil && code == "" && statusOf(listErr) == 0:
		return []sdk.Check{sdk.Failed(checkCredentials, "the S3 store does not answer: "+shown(listErr), "check endpoint (or the network to AWS) and that the store is running")}
	case credentialCodes[code]:
		return []sdk.Check{sdk.Failed(checkCredentials, "the S3 store refuses access_key_id and secret_access_key ("+code+")", "set the key pair of a user of this store in access_key_id and secret_access_key")}
	}
	out = append(out, sdk.Passed(checkCredentials, "accepted"))
	if code == "NoSuchBucket" || statusOf(listErr) == http.StatusNotFound {
		return append(out, sdk.Failed(checkBucket, fmt.Sprintf("bucket '%s' does not exist", bucket), "create it, or fix bucket"))
	}
	if regionCodes[code] || statusOf(listErr) == http.StatusMovedPermanently {
		return append(out, sdk.Passed(checkBucket, bucket), sdk.Failed(checkRegion, fmt.Sprintf("bucket '%s' is not in region '%s' (%s)", bucket, s.opts.Region, shown(listErr)), "set region to the bucket's region"))
	}
	out = append(out, sdk.Passed(checkBucket, bucket), s.checkRegion(ctx, client))
	err = s.probe(ctx, client)
	if err != nil {
		out = append(out, sdk.Failed(checkPut, fmt.Sprintf("writing and deleting %s in bucket '%s' failed: %s", ProbeKey, bucket, shown(err)),
			"allow s3:PutObject and s3:DeleteObject on the bucket for this user"))
	} else {
		out = append(out, sdk.Passed(checkPut, "written and deleted "+ProbeKey))
	}
	switch {
	case listErr == nil:
		out = append(out, sdk.Passed(checkList, "prefix '"+s.opts.Prefix+"' listed"))
	case s.opts.Buffered:
		out = append(out, sdk.Passed(checkList, "denied, not needed with delivery = \"buffered\""))
	default:
		out = append(out, sdk.Failed(checkList, fmt.Sprintf("listing bucket '%s' failed: %s; delivery = \"exactly_once\" lists the key prefix to find files already uploaded", bucket, shown(listErr)),
			"allow s3:ListBucket on the bucket (or the prefix) for this user, or set delivery = \"buffered\""))
	}
	// The probe object carries the object settings: its write tested
	// them (and s3:PutObjectTagging, the KMS key's kms:GenerateDataKey).
	o := &s.opts.Object
	switch {
	case (o.SSE != "" || o.SSECKey != "") && err != nil:
		out = append(out, sdk.Failed(checkEncryption, o.describe()+": the probe object was refused (see "+checkPut+")",
			"check that kms_key_id names a key of the store, and allow what the settings need: kms:GenerateDataKey on the KMS key for aws:kms, s3:PutObjectTagging for tags, s3:PutObjectAcl for acl"))
	case o.SSE != "" || o.SSECKey != "":
		out = append(out, sdk.Passed(checkEncryption, o.describe()+", the probe object written with it"))
	default:
		out = append(out, sdk.Passed(checkEncryption, o.describe()))
	}
	return append(out, s.checkIcebergTable(ctx, client)...)
}

// checkRegion compares region with the bucket's region when the store
// names it (AWS does, in HeadBucket's x-amz-bucket-region).
func (s *Sink) checkRegion(ctx context.Context, client *s3.Client) sdk.Check {
	ctx, cancel := context.WithTimeout(ctx, s.attemptTimeout(0))
	defer cancel()
	head, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.opts.Bucket)})
	if statusOf(err) == http.StatusMovedPermanently {
		return sdk.Failed(checkRegion, fmt.Sprintf("bucket '%s' is not in region '%s'", s.opts.Bucket, s.opts.Region), "set region to the bucket's region")
	}
	if err != nil || aws.ToString(head.BucketRegion) == "" {
		if s.opts.Endpoint != "" {
			return sdk.Passed(checkRegion, "'"+s.opts.Region+"' (endpoint set: passed through)")
		}
		return sdk.Passed(checkRegion, "'"+s.opts.Region+"' (the store does not name the bucket's region)")
	}
	if r := aws.ToString(head.BucketRegion); r != s.opts.Region {
		return sdk.Failed(checkRegion, fmt.Sprintf("bucket '%s' is in region '%s', not '%s'", s.opts.Bucket, r, s.opts.Region), "set region = \""+r+"\"")
	}
	return sdk.Passed(checkRegion, s.opts.Region)
}

// isSTSError reports whether err comes from an STS call (AssumeRole, for
// the role's credentials) rather than from the S3 request it was made for.
func isSTSError(err error) bool {
	for err != nil {
		var oe *smithy.OperationError
		if !errors.As(err, &oe) {
			return false
		}
		if oe.Service() == "STS" {
			return true
		}
		err = oe.Unwrap()
	}
	return false
}

// errorCode is the S3 error code of err, or "".
func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// statusOf is the HTTP status of a store's answer, or 0 without one.
func statusOf(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// shown is err's text with the user information and query of any URL in
// it masked.
func shown(err error) string { return confkit.MaskURLs(err.Error()) }

// checkIcebergTable is pico-connectors check's row of table_format = "iceberg":
// the catalog reached, the table loaded and the definition compared with
// it as Open would, changing nothing (icetable.Check); nothing when off.
func (s *Sink) checkIcebergTable(ctx context.Context, client *s3.Client) []sdk.Check {
	if !s.opts.Iceberg.Enabled {
		return nil
	}
	spec, err := s.opts.partitionSpec()
	var cols []icetable.Column
	if err == nil && len(s.opts.Columns) > 0 {
		cols, err = s.tableColumns()
	}
	var msg string
	if err == nil {
		msg, err = icetable.Check(ctx, s.opts.tableConfig(client), cols, specFields(spec))
	}
	if err != nil {
		return []sdk.Check{sdk.Failed(checkTable, s.opts.tableError(err).Error(),
			"reach the catalog with iceberg_catalog_uri and its credentials; for a change Iceberg cannot make, put the column back as it was or add one with another name, or write a new iceberg_table")}
	}
	return []sdk.Check{sdk.Passed(checkTable, msg)}
}
