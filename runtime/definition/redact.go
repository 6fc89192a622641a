package definition

import (
	"net/url"
	"strings"
)

// Mask replaces a secret in every view the runtime shows.
const Mask = "****"

// Redacted returns the runtime config for display (the config command and
// the API), keyed by the file's key names, with the API keys masked, the
// state URL's password removed and sensitive librdkafka properties masked.
func (r Runtime) Redacted() map[string]any {
	mask := func(s string) string {
		if s == "" {
			return ""
		}
		return Mask
	}
	stateURL := r.State.HTTP.URL
	if u, err := url.Parse(stateURL); err == nil {
		stateURL = u.Redacted()
	} else if stateURL != "" {
		stateURL = Mask
	}
	broker := map[string]any{
		"bootstrap_servers": r.Broker.BootstrapServers,
		"embedded_address":  r.Broker.EmbeddedAddress,
	}
	if len(r.Broker.Properties) > 0 {
		broker["properties"] = MaskProperties(r.Broker.Properties)
	}
	return map[string]any{
		"broker": broker,
		"http": map[string]any{
			"address":  r.HTTP.Address,
			"api_key":  mask(r.HTTP.APIKey),
			"tls_cert": r.HTTP.TLSCert,
			"tls_key":  r.HTTP.TLSKey,
		},
		"state": map[string]any{
			"storage": r.State.Storage,
			"path":    r.State.Path,
			"http": map[string]any{
				"url":          stateURL,
				"timeout":      r.State.HTTP.Timeout,
				"max_attempts": r.State.HTTP.MaxAttempts,
				"retry_delay":  r.State.HTTP.RetryDelay,
				"api_key":      mask(r.State.HTTP.APIKey),
			},
		},
		"connectors_dir": r.ConnectorsDir,
		"log":            map[string]any{"format": r.Log.Format, "level": r.Log.Level},
		"shutdown_grace": r.ShutdownGrace,
	}
}

// sensitiveProperties are the librdkafka settings librdkafka itself marks
// as sensitive (CONFIGURATION.md).
var sensitiveProperties = map[string]bool{
	"sasl.password":                                     true,
	"sasl.oauthbearer.client.secret":                    true,
	"sasl.oauthbearer.config":                           true,
	"sasl.oauthbearer.assertion.private.key.passphrase": true,
	"sasl.oauthbearer.assertion.private.key.pem":        true,
	"ssl.key.password":                                  true,
	"ssl.key.pem":                                       true,
	"ssl_key":                                           true,
	"ssl.keystore.password":                             true,
	"ssl.truststore.password":                           true,
}

// MaskProperties copies librdkafka properties, masking those librdkafka
// treats as sensitive and any whose name ends in password or secret.
func MaskProperties(props map[string]string) map[string]string {
	out := make(map[string]string, len(props))
	for k, v := range props {
		lk := strings.ToLower(k)
		if sensitiveProperties[lk] || strings.HasSuffix(lk, "password") || strings.HasSuffix(lk, "secret") {
			v = Mask
		}
		out[k] = v
	}
	return out
}
