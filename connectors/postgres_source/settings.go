package postgressource

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"slices"

	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"github.com/picomq/pico-connectors/internal/jsonscan"
	"github.com/picomq/pico-connectors/runtime/confkit"
)

// Per-table settings ([[plugin_config.table_settings]]): which columns go
// out, which are masked or hashed, and which make the record key. They are
// applied where records are encoded (record.go), so snapshot, CDC and
// polling records get the same treatment: the row, __before, a delete's
// old row, __tracking_value and the record key. A masked or hashed value
// is never encoded; a column left out of the value keeps its place in the
// key.

// colRule is what table_settings does to one column.
type colRule struct {
	drop bool      // left out of the value (exclude_columns, or not in include_columns)
	mask []byte    // written instead of the value, as a JSON string (mask_columns)
	mac  hash.Hash // HMAC-SHA256 written as hex instead of the value (hash_columns)
	sum  []byte    // scratch for mac
}

// dropRule is shared by the columns include_columns does not name.
var dropRule = &colRule{drop: true}

// tableRules are one table's settings.
type tableRules struct {
	index   int             // position in table_settings, for messages
	include map[string]bool // nil: every column
	cols    map[string]*colRule
	keyCols []string          // the record key's columns; nil: the primary key
	named   map[string]string // column -> the setting that names it, for the catalog check
}

// rule returns the rule of column name, nil for none.
func (r *tableRules) rule(name string) *colRule {
	if r == nil {
		return nil
	}
	if c := r.cols[name]; c != nil {
		return c
	}
	if r.include != nil && !r.include[name] {
		return dropRule
	}
	return nil
}

// newTableRules builds the rules of the settings of table i; check has
// accepted them.
func newTableRules(i int, ts postgressourceconfig.TableSettingsItem) *tableRules {
	r := &tableRules{index: i, cols: map[string]*colRule{}, named: map[string]string{}, keyCols: ts.KeyColumns}
	name := func(key string, cols []string) {
		for _, c := range cols {
			r.named[c] = key
		}
	}
	name("key_columns", ts.KeyColumns)
	name("hash_columns", ts.HashColumns)
	name("mask_columns", ts.MaskColumns)
	name("include_columns", ts.IncludeColumns)
	name("exclude_columns", ts.ExcludeColumns)
	if ts.IncludeColumns != nil {
		r.include = map[string]bool{}
		for _, c := range ts.IncludeColumns {
			r.include[c] = true
		}
	}
	mask := jsonscan.AppendString(nil, ts.MaskValue)
	for _, c := range ts.MaskColumns {
		r.cols[c] = &colRule{mask: mask}
	}
	key := []byte(ts.HashKey.Reveal())
	for _, c := range ts.HashColumns {
		r.cols[c] = &colRule{mac: hmac.New(sha256.New, key)}
	}
	for _, c := range ts.ExcludeColumns {
		r.cols[c] = dropRule
	}
	return r
}

// appendCol appends the JSON form of the non-NULL text value v of column
// c, masked or hashed when its rule says so. Leaving a column out is the
// caller's business (a key keeps its columns).
func (e *encoder) appendCol(buf []byte, c *column, v []byte) []byte {
	r := c.rule
	switch {
	case r == nil || r.drop:
		if c.dbz != nil {
			return e.appendDbz(buf, c.dbz, v)
		}
		return e.appendValue(buf, c.typ, v)
	case r.mask != nil:
		return append(buf, r.mask...)
	default:
		r.mac.Reset()
		r.mac.Write(v)
		r.sum = r.mac.Sum(r.sum[:0])
		buf = append(buf, '"')
		buf = hex.AppendEncode(buf, r.sum)
		return append(buf, '"')
	}
}

// dropped reports whether column c is left out of the value.
func (c *column) dropped() bool { return c.rule != nil && c.rule.drop }

// applyRules gives rel's columns their rules and sets its record key.
func (s *Source) applyRules(rel *relation) {
	rel.recKey = rel.keyIdx
	r := s.rulesFor(rel.table)
	if r == nil {
		return
	}
	for i := range rel.cols {
		rel.cols[i].rule = r.rule(rel.cols[i].name)
	}
	if len(r.keyCols) > 0 {
		rel.recKey = keyIndexes(rel.cols, r.keyCols)
	}
}

// checkSettings checks table_settings against the catalog: every column
// it names exists, and the record key is not masked (every row would get
// the same key).
func (s *Source) checkSettings(t tableName, info *tableInfo) error {
	r := s.rulesFor(t.String())
	if r == nil {
		return nil
	}
	at := fmt.Sprintf("table_settings[%d]", r.index)
	names := make([]string, 0, len(r.named))
	for c := range r.named {
		names = append(names, c)
	}
	slices.Sort(names)
	for _, c := range names {
		if _, ok := info.colType[c]; !ok {
			return permanent("%s.%s: table %s has no column %q", at, r.named[c], t, c)
		}
	}
	key := r.keyCols
	if key == nil {
		key = info.pk
	}
	for _, c := range key {
		if rl := r.cols[c]; rl != nil && rl.mask != nil {
			what := "the primary key, the record key"
			if r.keyCols != nil {
				what = "in key_columns"
			}
			return permanent("%s.mask_columns: column %q of table %s is %s, and a masked key would give every row the same key; hash it (hash_columns) or key by other columns (key_columns)", at, c, t, what)
		}
	}
	return nil
}

// checkSettingsConfig returns the problems of table_settings that need no
// database: a table that does not parse or is not one of tables, the same
// table twice, include_columns with exclude_columns, a column both masked
// and hashed, a masked key column.
func checkSettingsConfig(cfg postgressourceconfig.Config) confkit.Problems {
	var ps confkit.Problems
	listed := map[string]bool{}
	var patterns []*tablePattern
	for _, t := range cfg.Tables {
		tn, p, err := parseTableEntry(t)
		switch {
		case err != nil:
		case p != nil:
			patterns = append(patterns, p)
			listed[p.text] = true
		default:
			listed[tn.String()] = true
		}
	}
	matched := func(tn tableName) bool {
		for _, p := range patterns {
			if p.match(tn) {
				return true
			}
		}
		return false
	}
	seen := map[string]int{}
	for i, ts := range cfg.TableSettings {
		at := fmt.Sprintf("table_settings[%d]", i)
		tn, p, err := parseTableEntry(ts.Table)
		id := tn.String()
		switch {
		case err != nil:
			ps = append(ps, confkit.Problem{Key: at + ".table", Value: ts.Table, Rule: "format", Message: err.Error()})
			continue
		case p != nil:
			id = p.text
			if !listed[id] {
				ps = append(ps, confkit.Problem{Key: at + ".table", Value: ts.Table, Rule: "format", Message: fmt.Sprintf("pattern %s is not one of tables; a pattern here must be written as in tables", p.text)})
			}
		case !listed[id] && !matched(tn):
			ps = append(ps, confkit.Problem{Key: at + ".table", Value: ts.Table, Rule: "format", Message: fmt.Sprintf("%s is not one of tables and matches none of its patterns; settings apply to the tables read", tn)})
		}
		if j, dup := seen[id]; dup {
			ps = append(ps, confkit.Problem{Key: at + ".table", Value: ts.Table, Rule: "x-unique", Message: fmt.Sprintf("%s already has settings in table_settings[%d]", id, j)})
		}
		seen[id] = i
		if ts.IncludeColumns != nil && ts.ExcludeColumns != nil {
			ps = append(ps, confkit.Problem{Key: at + ".exclude_columns", Rule: "x-excludes", Message: "include_columns and exclude_columns: choose one"})
		}
		for _, c := range ts.MaskColumns {
			if slices.Contains(ts.HashColumns, c) {
				ps = append(ps, confkit.Problem{Key: at + ".hash_columns", Value: c, Rule: "x-excludes", Message: fmt.Sprintf("column %q is in mask_columns and hash_columns: choose one", c)})
			}
			if slices.Contains(ts.KeyColumns, c) {
				ps = append(ps, confkit.Problem{Key: at + ".mask_columns", Value: c, Rule: "x-excludes", Message: fmt.Sprintf("column %q is in key_columns, and a masked key would give every row the same key; hash it instead", c)})
			}
		}
	}
	return ps
}
