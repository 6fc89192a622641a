package definition

import (
	"reflect"
	"strings"

	"github.com/picomq/pico-connectors/runtime/confkit"
)

// Redacted returns the runtime config for display (the config command and
// the API), keyed by the file's key names (toml tags), every key of
// Runtime included: a confkit.Secret shows confkit.Mask, a URL its
// user information and query values masked (confkit.MaskURL), and
// sensitive librdkafka properties masked.
func (r Runtime) Redacted() map[string]any {
	return redactStruct(reflect.ValueOf(r))
}

// redactStruct is Redacted for any struct of the runtime config.
func redactStruct(v reflect.Value) map[string]any {
	out := map[string]any{}
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		fv := v.Field(i)
		switch {
		case fv.Type() == secretType:
			out[name] = fv.Interface().(confkit.Secret).String()
		case fv.Kind() == reflect.Struct:
			out[name] = redactStruct(fv)
		case fv.Kind() == reflect.String:
			out[name] = confkit.MaskURL(fv.String())
		case fv.Type() == stringsType:
			out[name] = append([]string{}, fv.Interface().([]string)...)
		case fv.Type() == reflect.TypeFor[map[string]string]():
			if fv.Len() > 0 {
				out[name] = MaskProperties(fv.Interface().(map[string]string))
			}
		case fv.Kind() == reflect.Bool, fv.CanInt(), fv.CanUint(), fv.CanFloat():
			out[name] = fv.Interface()
		default:
			// A kind this does not know how to show safely (a slice, a
			// pointer, another map): masked until a case shows it.
			out[name] = confkit.Mask
		}
	}
	return out
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
			v = confkit.Mask
		}
		out[k] = v
	}
	return out
}
