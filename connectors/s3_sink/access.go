package s3sink

import (
	"encoding/json"
	"fmt"
	"time"
)

// Access settings: the role the sink assumes on top of its credentials,
// and the CA it trusts besides the system's. credentials.go builds the
// client's credentials and HTTP client from them.

// roleSettings are role_arn and the keys that go with it.
type roleSettings struct {
	ARN           string
	ExternalID    string
	SessionName   string
	Duration      time.Duration
	SessionPolicy string // JSON
	// STSEndpoint is sts_endpoint; credentials.go falls back to endpoint.
	STSEndpoint string
}

// validate checks what the schema cannot state: the keys that only go
// with role_arn, and that the session policy is JSON.
func (r *roleSettings) validate() error {
	if r.ARN == "" {
		for _, k := range []struct{ key, value string }{
			{"external_id", r.ExternalID}, {"role_session_policy", r.SessionPolicy}, {"sts_endpoint", r.STSEndpoint},
		} {
			if k.value != "" {
				return fmt.Errorf("%s is set but role_arn is not: it applies only to the role the sink assumes; set role_arn or remove %s", k.key, k.key)
			}
		}
		return nil
	}
	if r.SessionPolicy != "" && !json.Valid([]byte(r.SessionPolicy)) {
		return fmt.Errorf("role_session_policy is not valid JSON: write an IAM policy document, {\"Version\": \"2012-10-17\", \"Statement\": [...]}")
	}
	return nil
}
