package s3sink

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// The client's access: an assumed role on top of the static keys or the
// default chain, and an HTTP client that trusts ca_file.

// roleExpiryWindow is how long before they expire assumed-role
// credentials are renewed, so that no request is signed with credentials
// that expire on its way. A variable, so that a test can bring the
// renewal of 15-minute credentials to within seconds.
var roleExpiryWindow = 5 * time.Minute

// httpClientOption returns the load option of an HTTP client that trusts
// the CAs of caFile besides the system's, or nil when caFile is "".
func httpClientOption(caFile string) (func(*awsconfig.LoadOptions) error, error) {
	if caFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("ca_file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ca_file '%s' holds no PEM certificate: give a file of -----BEGIN CERTIFICATE----- blocks", caFile)
	}
	client := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		if tr.TLSClientConfig == nil {
			tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		tr.TLSClientConfig.RootCAs = pool
	})
	return awsconfig.WithHTTPClient(client), nil
}

// assumeRole returns cfg's credentials wrapped in an assumed role: STS
// AssumeRole called with cfg's credentials (the static keys or the
// default chain), at sts_endpoint, or at endpoint when that is set (MinIO
// serves STS on its S3 address), or at AWS's STS of the region. The cache
// renews them roleExpiryWindow before they expire, so a long run
// continues without a restart.
func assumeRole(cfg aws.Config, o *options) aws.CredentialsProvider {
	r := &o.Role
	stsClient := sts.NewFromConfig(cfg, func(so *sts.Options) {
		switch {
		case r.STSEndpoint != "":
			so.BaseEndpoint = aws.String(r.STSEndpoint)
		case o.Endpoint != "":
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
	})
	provider := stscreds.NewAssumeRoleProvider(stsClient, r.ARN, func(ao *stscreds.AssumeRoleOptions) {
		ao.RoleSessionName = r.SessionName
		ao.Duration = r.Duration
		if r.ExternalID != "" {
			ao.ExternalID = aws.String(r.ExternalID)
		}
		if r.SessionPolicy != "" {
			ao.Policy = aws.String(r.SessionPolicy)
		}
	})
	return aws.NewCredentialsCache(provider, func(co *aws.CredentialsCacheOptions) {
		co.ExpiryWindow = roleExpiryWindow // below role_duration's 15m minimum
	})
}
