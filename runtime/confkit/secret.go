package confkit

import (
	"fmt"
	"log/slog"
)

// Mask is what a set Secret prints instead of its value.
const Mask = "****"

// Secret holds a credential. Every way of printing it (String, every fmt
// verb including %#v, JSON, text and slog) shows Mask when it is set and
// nothing when it is empty; only Reveal returns the value.
type Secret struct {
	value string
}

// NewSecret wraps a value.
func NewSecret(value string) Secret { return Secret{value: value} }

// Reveal returns the value. Call it only where the credential is used.
func (s Secret) Reveal() string { return s.value }

// IsSet reports whether the secret has a non-empty value.
func (s Secret) IsSet() bool { return s.value != "" }

// String returns Mask, or "" for an empty secret.
func (s Secret) String() string {
	if s.value == "" {
		return ""
	}
	return Mask
}

// GoString returns the mask in Go syntax.
func (s Secret) GoString() string { return fmt.Sprintf("confkit.Secret(%q)", s.String()) }

// Format prints the mask for every verb.
func (s Secret) Format(f fmt.State, verb rune) {
	switch {
	case verb == 'v' && f.Flag('#'):
		fmt.Fprint(f, s.GoString())
	case verb == 'q':
		fmt.Fprintf(f, "%q", s.String())
	default:
		fmt.Fprint(f, s.String())
	}
}

// MarshalJSON writes the mask as a JSON string.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + s.String() + `"`), nil }

// MarshalText writes the mask.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// LogValue makes slog print the mask.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }
