package postgressource

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"github.com/picomq/pico-connectors/runtime/confkit"
)

// Operation names, as written in each record's __op field.
const (
	opInsert   = "insert"
	opUpdate   = "update"
	opDelete   = "delete"
	opTruncate = "truncate"
	opRead     = "read" // snapshot and polling rows
)

var identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]*$`)

// defaultName derives a slot or publication name from the connector key.
func defaultName(key string) string {
	var b strings.Builder
	b.WriteString("picomq_")
	for _, r := range strings.ToLower(key) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) > 63 {
		s = s[:63]
	}
	return s
}

// tableName is a schema-qualified table.
type tableName struct {
	Schema, Name string
}

func (t tableName) String() string { return t.Schema + "." + t.Name }

// quoted returns the table as a quoted SQL identifier.
func (t tableName) quoted() string { return quoteIdent(t.Schema) + "." + quoteIdent(t.Name) }

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// quoteLiteral returns s as a single-quoted SQL string literal, as the
// options of START_REPLICATION take their values.
func quoteLiteral(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }

// parseTable reads "schema.table" or "table" (schema public). Quoted parts
// ("My Schema"."T") keep their case.
func parseTable(s string) (tableName, error) {
	parts, err := splitIdent(s)
	if err != nil {
		return tableName{}, err
	}
	switch len(parts) {
	case 1:
		return tableName{"public", parts[0]}, nil
	case 2:
		return tableName{parts[0], parts[1]}, nil
	}
	return tableName{}, fmt.Errorf("%q is not schema.table", s)
}

func splitIdent(s string) ([]string, error) {
	var parts []string
	for len(s) > 0 {
		if s[0] == '"' {
			var b strings.Builder
			i := 1
			for ; i < len(s); i++ {
				if s[i] == '"' {
					if i+1 < len(s) && s[i+1] == '"' {
						b.WriteByte('"')
						i++
						continue
					}
					break
				}
				b.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("%q has an unclosed quote", s)
			}
			parts = append(parts, b.String())
			s = s[i+1:]
		} else {
			i := strings.IndexByte(s, '.')
			if i < 0 {
				i = len(s)
			}
			part := s[:i]
			if !identRe.MatchString(part) {
				return nil, fmt.Errorf("%q is not a valid name (letters, digits, _ and $; quote other names)", part)
			}
			parts = append(parts, strings.ToLower(part))
			s = s[i:]
		}
		if len(s) > 0 {
			if s[0] != '.' || len(s) == 1 {
				return nil, fmt.Errorf("expected schema.table")
			}
			s = s[1:]
		}
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("empty table name")
	}
	return parts, nil
}

// check returns the problems of cfg that the schema cannot state, one a
// line: a connection string that does not parse, table names that do not
// parse (quoting, schema.table, patterns), delete_after_read with processed_column
// (the dialect has no keyword for two keys that exclude each other), and
// the rules of table_settings across keys (settings.go). Every other rule
// is the schema's, checked by Load, or by Validate for a Config built in
// code. The registration runs it after Load, so validate reports it too.
func check(cfg postgressourceconfig.Config) error {
	var ps confkit.Problems
	if _, err := parseConnString(cfg); err != nil {
		ps = append(ps, confkit.Problem{Key: "connection_string", Rule: "format", Message: err.Error()})
	}
	for i, t := range cfg.Tables {
		if _, _, err := parseTableEntry(t); err != nil { // patterns.go
			ps = append(ps, confkit.Problem{Key: fmt.Sprintf("tables[%d]", i), Value: t, Rule: "format", Message: err.Error()})
		}
	}
	if cfg.SignalTable != "" {
		if _, err := parseTable(cfg.SignalTable); err != nil {
			ps = append(ps, confkit.Problem{Key: "signal_table", Value: cfg.SignalTable, Rule: "format", Message: err.Error()})
		}
	}
	ps = append(ps, checkSettingsConfig(cfg)...)
	if cfg.Mode == postgressourceconfig.ModePolling && cfg.DeleteAfterRead && cfg.ProcessedColumn != "" {
		ps = append(ps, confkit.Problem{Key: "delete_after_read", Rule: "x-excludes", Message: "delete_after_read and processed_column: choose one; a deleted row cannot be marked processed"})
	}
	return ps.Err()
}

// parseConnString parses connection_string. Its error never quotes the
// string, which holds the password: it gives pgconn's reason (such as
// "failed to configure TLS (sslmode is invalid)"), leaving out a cause
// that may quote the string, such as a URL parser's.
func parseConnString(cfg postgressourceconfig.Config) (*pgconn.Config, error) {
	c, err := pgconn.ParseConfig(cfg.ConnectionString.Reveal())
	if err != nil {
		why := ""
		var pe *pgconn.ParseConfigError
		if errors.As(err, &pe) {
			// Error() is "cannot parse `REDACTED`: REASON (CAUSE)"; the
			// cause may quote the string (a URL parser's does, and holds
			// "://").
			msg := pe.Error()
			cause := errors.Unwrap(pe)
			if cause != nil {
				msg = strings.TrimSuffix(msg, " ("+cause.Error()+")")
			}
			if i := strings.LastIndex(msg, "`: "); i >= 0 {
				why = ": " + msg[i+3:]
			}
			if cause != nil && !quotesString(cause.Error()) {
				why += " (" + cause.Error() + ")"
			}
		}
		return nil, fmt.Errorf("not a valid PostgreSQL connection string%s; use a URL postgres://user:pass@host:5432/db or key=value pairs", why)
	}
	return c, nil
}

// quotesString reports whether a parser's error may hold a piece of a
// connection string: a URL (a URL parser's error quotes it), a user@host
// or a password.
func quotesString(msg string) bool {
	return strings.Contains(msg, "://") || strings.Contains(msg, "@") || strings.Contains(strings.ToLower(msg), "password")
}
