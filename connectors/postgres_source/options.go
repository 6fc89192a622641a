package postgressource

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// options is the engine's view of the configuration. New fills it from
// the generated postgressourceconfig.Config; tests and benchmarks build it
// directly.
type options struct {
	ConnString        string
	Mode              string // "cdc" or "polling"
	Tables            []string
	BatchSize         int
	PollInterval      time.Duration
	Slot              string
	Publication       string
	CreateSlot        bool
	CreatePublication bool
	CaptureOperations []string // insert, update, delete, truncate
	Snapshot          string   // "never" or "initial"
	Reader            string   // readerPeek or readerStream ("" is stream)
	TrackingColumn    string
	InitialOffset     string
	ProcessedColumn   string
	DeleteAfterRead   bool
	PrimaryKeyColumn  string
	IncludeMetadata   bool
	NumericAsString   bool
	slotOptions       // slots.go: slot watch and heartbeat
}

// Operation names, as written in each record's __op field.
const (
	opInsert   = "insert"
	opUpdate   = "update"
	opDelete   = "delete"
	opTruncate = "truncate"
	opRead     = "read" // snapshot and polling rows
)

// CDC readers.
const (
	readerPeek   = "peek"
	readerStream = "stream"
)

var (
	identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]*$`)
	slotRe  = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)
)

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

// check validates what the schema cannot, returning every problem.
func (o *options) check() []string {
	var p []string
	if o.Mode != "cdc" && o.Mode != "polling" {
		p = append(p, fmt.Sprintf("mode: %q is not cdc or polling", o.Mode))
	}
	if len(o.Tables) == 0 {
		p = append(p, "tables: at least one table is needed")
	}
	for _, t := range o.Tables {
		if _, err := parseTable(t); err != nil {
			p = append(p, fmt.Sprintf("tables: %v", err))
		}
	}
	if o.BatchSize < 1 {
		p = append(p, fmt.Sprintf("batch_size: %d is below 1", o.BatchSize))
	}
	if o.Mode == "cdc" {
		if !slotRe.MatchString(o.Slot) {
			p = append(p, fmt.Sprintf("replication_slot: %q must be lower-case letters, digits and _, at most 63 characters", o.Slot))
		}
		if o.Publication == "" {
			p = append(p, "publication: must not be empty")
		}
		for _, op := range o.CaptureOperations {
			switch op {
			case opInsert, opUpdate, opDelete, opTruncate:
			default:
				p = append(p, fmt.Sprintf("capture_operations: %q is not insert, update, delete or truncate", op))
			}
		}
		if o.Reader != "" && o.Reader != readerPeek && o.Reader != readerStream {
			p = append(p, fmt.Sprintf("cdc_reader: %q is not peek or stream", o.Reader))
		}
		if o.Snapshot != "never" && o.Snapshot != "initial" {
			p = append(p, fmt.Sprintf("snapshot: %q is not never or initial", o.Snapshot))
		}
	}
	if o.Mode == "polling" {
		if o.DeleteAfterRead && o.ProcessedColumn != "" {
			p = append(p, "delete_after_read and processed_column: choose one; a deleted row cannot be marked processed")
		}
	}
	return p
}
