// Package naming turns schema keys into Go identifiers: split on anything
// that is not a letter or digit, capitalise each word, upper-case the
// project's initialisms, and keep names unique within a scope.
package naming

import (
	"go/token"
	"strconv"
	"strings"
	"unicode"
)

// Initialisms are written upper-case in Go names.
var Initialisms = map[string]bool{
	"id": true, "url": true, "json": true, "http": true, "lsn": true, "ssl": true, "tls": true,
	"api": true, "aws": true, "s3": true, "sql": true, "uri": true, "cdc": true, "ttl": true,
	"ip": true, "tcp": true, "udp": true, "utf8": true, "uuid": true, "cpu": true, "dns": true,
	"jsonl": true, "xml": true, "csv": true, "ca": true,
}

// Words splits s on every rune that is not a letter or digit.
func Words(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// Part returns key as the tail of a longer identifier: like Exported, but
// a leading digit or caseless letter needs no X, and "" gives "".
func Part(key string) string {
	n := Exported(key)
	if n == "X" {
		return ""
	}
	if strings.HasPrefix(n, "X") && !strings.HasPrefix(strings.ToUpper(strings.Join(Words(key), "")), "X") {
		return n[1:]
	}
	return n
}

// Exported returns the exported Go name of a key: "access_key_id" gives
// AccessKeyID, "s3_url" S3URL. A key with no letters or digits, or one that
// would start with a digit, is prefixed with X; the result is always a valid
// exported identifier.
func Exported(key string) string {
	var b strings.Builder
	for _, w := range Words(key) {
		lw := strings.ToLower(w)
		if Initialisms[lw] {
			b.WriteString(strings.ToUpper(lw))
			continue
		}
		rs := []rune(w)
		rs[0] = unicode.ToUpper(rs[0])
		b.WriteString(string(rs))
	}
	name := b.String()
	if name == "" {
		return "X"
	}
	first := []rune(name)[0]
	if !unicode.IsUpper(first) {
		// Digits and letters with no case (such as CJK) cannot start an
		// exported name.
		name = "X" + name
	}
	return name
}

// Valid reports whether name is a Go identifier that is not a keyword.
func Valid(name string) bool {
	return token.IsIdentifier(name) && !token.IsKeyword(name)
}

// Scope hands out unique names.
type Scope struct {
	used map[string]bool
}

// NewScope returns a scope with the reserved names already taken.
func NewScope(reserved ...string) *Scope {
	s := &Scope{used: map[string]bool{}}
	for _, r := range reserved {
		s.used[r] = true
	}
	return s
}

// Take returns name, or name with the smallest numeric suffix from 2 up
// that is still free, and marks it used.
func (s *Scope) Take(name string) string {
	if !s.used[name] {
		s.used[name] = true
		return name
	}
	for i := 2; ; i++ {
		c := name + strconv.Itoa(i)
		if !s.used[c] {
			s.used[c] = true
			return c
		}
	}
}

// Has reports whether name is taken.
func (s *Scope) Has(name string) bool { return s.used[name] }

// Package returns the package name of a schema: its name without
// underscores, lower-cased, plus "config". Non-letters and non-digits are
// dropped; a leading digit gets a "c" in front.
func Package(schemaName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(schemaName) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	p := b.String() + "config"
	if p[0] >= '0' && p[0] <= '9' {
		p = "c" + p
	}
	return p
}
