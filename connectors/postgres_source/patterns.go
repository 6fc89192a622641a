package postgressource

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Table patterns: an entry of tables (or a table_settings' table) may
// name tables by pattern rather than by name:
//
//   - a glob, public.orders_* or *.audit_?: * is any run of characters
//     but the dot, ? any one, in a part's unquoted name (matched as
//     PostgreSQL folds it, lower case); a bare pattern means schema public;
//   - a regular expression, re:^public\.orders_[0-9]{4}$, matched (RE2,
//     unanchored unless it says so) against schema.table.
//
// A pattern matches plain and partitioned tables, never a partition (a
// partition is captured through its root) nor a view. The tables matched
// at connect join the exact names; while the source runs, the catalog is
// read again every table_discovery_interval, and a table created since
// that matches is captured from then on: in CDC it is added to the
// publication (create_publication = true; otherwise it must be in it
// already), and its existing rows are read by the incremental snapshot
// (snapshot = "initial" with the stream reader), as for a table added to
// tables; in polling it is polled from initial_offset. A matched table the
// source cannot capture (no SELECT, no replica identity while updates or
// deletes are published, not in a publication the source may not change)
// is left out with a warning, and looked at again at the next discovery;
// a matched table dropped while the source runs is simply dropped.

// tablePattern is an entry of tables that is a pattern.
type tablePattern struct {
	text string
	re   *regexp.Regexp // matched against schema.table
}

// isPattern reports whether an entry of tables is a pattern: re:..., or
// a * or ? outside quotes (names with those characters are quoted).
func isPattern(s string) bool {
	if strings.HasPrefix(s, "re:") {
		return true
	}
	quoted := false
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
		case !quoted && (r == '*' || r == '?'):
			return true
		}
	}
	return false
}

// parsePattern compiles a pattern entry.
func parsePattern(s string) (*tablePattern, error) {
	if expr, ok := strings.CutPrefix(s, "re:"); ok {
		re, err := regexp.Compile(expr)
		if err != nil {
			return nil, fmt.Errorf("%q is not a valid regular expression (RE2 syntax, matched against schema.table): %v", expr, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		}
		return &tablePattern{text: s, re: re}, nil
	}
	parts := strings.Split(s, ".")
	if len(parts) == 1 {
		parts = []string{"public", parts[0]}
	}
	if len(parts) != 2 {
		return nil, fmt.Errorf("%q is not a schema.table pattern (* any characters but the dot, ? one character; or re:REGEX)", s)
	}
	var b strings.Builder
	b.WriteByte('^')
	for i, p := range parts {
		if i > 0 {
			b.WriteString(`\.`)
		}
		if p == "" || strings.Contains(p, `"`) {
			return nil, fmt.Errorf("%q is not a schema.table pattern (unquoted parts, * any characters but the dot, ? one character; or re:REGEX)", s)
		}
		for _, r := range strings.ToLower(p) {
			switch r {
			case '*':
				b.WriteString(`[^.]*`)
			case '?':
				b.WriteString(`[^.]`)
			default:
				b.WriteString(regexp.QuoteMeta(string(r)))
			}
		}
	}
	b.WriteByte('$')
	return &tablePattern{text: s, re: regexp.MustCompile(b.String())}, nil
}

func (p *tablePattern) match(t tableName) bool { return p.re.MatchString(t.String()) }

// tablesRule is an entry of tables or of table_settings: a name or a
// pattern, parsed.
func parseTableEntry(s string) (tableName, *tablePattern, error) {
	if isPattern(s) {
		p, err := parsePattern(s)
		return tableName{}, p, err
	}
	t, err := parseTable(s)
	return t, nil, err
}

// matchedBy returns the first pattern of tables that matches t, or nil.
func (s *Source) matchedBy(t tableName) *tablePattern {
	for _, p := range s.patterns {
		if p.match(t) {
			return p
		}
	}
	return nil
}

// candidates reads the plain and partitioned tables (not partitions) that
// the patterns match and that are not captured yet, in name order.
func (s *Source) candidates(ctx context.Context) ([]tableName, error) {
	rows, err := s.query(ctx, `SELECT n.nspname, c.relname FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%'
ORDER BY 1, 2`)
	if err != nil {
		return nil, err
	}
	var out []tableName
	for _, r := range rows {
		t := tableName{string(r[0]), string(r[1])}
		if s.inSet[t.String()] || s.isSignalTable(t) || s.matchedBy(t) == nil {
			continue
		}
		out = append(out, t)
	}
	return out, nil
}

// resolvePatterns adds the tables the patterns match to tables, at
// connect, before the mode's checks. A table that cannot be captured is
// left out with a warning.
func (s *Source) resolvePatterns(ctx context.Context) error {
	if len(s.patterns) == 0 {
		return nil
	}
	found, err := s.candidates(ctx)
	if err != nil {
		return err
	}
	for _, t := range found {
		info, err := s.loadTable(ctx, t)
		if err != nil {
			return err
		}
		if err := s.checkSettings(t, info); err != nil {
			return err
		}
		if s.cfg.Mode == "cdc" {
			// setupPublication adds it; what it would refuse is left out.
			if _, err := s.capturable(ctx, t); err != nil {
				if isConnError(err) {
					return err
				}
				s.warnOnce(t, "a table matched by a pattern of tables cannot be captured: left out", err)
				continue
			}
		}
		s.addTable(t, info)
	}
	s.discovered = time.Now()
	return nil
}

// addTable makes t one of the captured tables.
func (s *Source) addTable(t tableName, info *tableInfo) {
	s.tables = append(s.tables, t)
	s.inSet[t.String()] = true
	s.info[t.String()] = info
	s.log.Info("table matched by a pattern of tables: captured", "table", t.String(), "pattern", s.matchedBy(t).text)
}

// dropMatched takes t, a pattern's table that was dropped, out of tables.
// It reports false for a table tables names exactly (an error).
func (s *Source) dropMatched(t tableName) bool {
	if s.exact[t.String()] {
		return false
	}
	s.tables = slices.DeleteFunc(s.tables, func(x tableName) bool { return x == t })
	delete(s.inSet, t.String())
	delete(s.info, t.String())
	if s.committed.Incr != nil {
		delete(s.committed.Incr, t.String())
	}
	s.log.Info("table matched by a pattern of tables was dropped: no longer captured", "table", t.String())
	return true
}

// discover looks, every table_discovery_interval, for tables created since
// that the patterns match, and captures them. It runs at the start of a
// Poll with nothing in flight: no open peek, no open transaction in the
// stream.
func (s *Source) discover(ctx context.Context) error {
	if len(s.patterns) == 0 || time.Since(s.discovered) < s.cfg.TableDiscoveryInterval || s.cursor != nil || s.snapTx {
		return nil
	}
	if d := s.streamDec; d != nil && (d.inTxn || len(d.msgs) > 0 || s.chunk != nil) {
		return nil
	}
	s.discovered = time.Now()
	found, err := s.candidates(ctx)
	if err != nil || len(found) == 0 {
		return err
	}
	var added []tableName
	for _, t := range found {
		info, err := s.loadTable(ctx, t)
		if err != nil {
			if isConnError(err) {
				return err
			}
			s.warnOnce(t, "a table matched by a pattern of tables cannot be read: left out", err)
			continue
		}
		if err := s.checkSettings(t, info); err != nil {
			s.warnOnce(t, "a table matched by a pattern of tables does not fit its table_settings: left out", err)
			continue
		}
		if s.cfg.Mode == "cdc" {
			if err := s.publishAdded(ctx, t); err != nil {
				if isConnError(err) {
					return err
				}
				s.warnOnce(t, "a table matched by a pattern of tables cannot be captured: left out", err)
				continue
			}
		}
		s.addTable(t, info)
		added = append(added, t)
	}
	if len(added) == 0 {
		return nil
	}
	if s.cfg.Mode != "cdc" {
		// The plans again, with the new tables; side effects acknowledged
		// but not applied yet are kept (setupPolling queues only the last
		// checkpoint's).
		queued := s.applyQueue
		err := s.setupPolling(ctx)
		s.applyQueue = append(queued, s.applyQueue...)
		return err
	}
	initial := s.committed.Snapshot != nil && !s.committed.Snapshot.Done
	for _, t := range added {
		s.committed.Known = append(s.committed.Known, t.String())
		if !initial { // else the initial snapshot, still running, reads it
			s.queueIncremental(t.String())
		}
		if d := s.streamDec; d != nil {
			d.refresh(t)
		}
	}
	return nil
}

// warnOnce logs a table left out, once per table and reason.
func (s *Source) warnOnce(t tableName, msg string, err error) {
	k := t.String() + "\x00" + err.Error()
	if s.warned[k] {
		return
	}
	if s.warned == nil {
		s.warned = map[string]bool{}
	}
	s.warned[k] = true
	s.log.Warn(msg, "table", t.String(), "error", err)
}

// capturable says why a table a pattern matches cannot be captured in
// CDC, or nil: no SELECT, or, outside the publication, a publication the
// source may not change or no replica identity while updates or deletes
// are published. published says it is in the publication already.
func (s *Source) capturable(ctx context.Context, t tableName) (published bool, err error) {
	r, err := s.query(ctx, `SELECT has_table_privilege($1, 'SELECT'), current_user`, t.quoted())
	if err != nil {
		return false, err
	}
	if string(r[0][0]) != "t" {
		return false, fmt.Errorf("user %q lacks SELECT on table %s; grant it with GRANT SELECT ON %s TO %s", r[0][1], t, t.quoted(), quoteIdent(string(r[0][1])))
	}
	in, err := s.query(ctx, `SELECT 1 FROM pg_catalog.pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3`, s.cfg.Publication, t.Schema, t.Name)
	if err != nil || len(in) > 0 {
		return len(in) > 0, err
	}
	if !s.cfg.CreatePublication {
		return false, fmt.Errorf("publication %q does not include %s and create_publication is false; add it with ALTER PUBLICATION %s ADD TABLE %s", s.cfg.Publication, t, quoteIdent(s.cfg.Publication), t.quoted())
	}
	return false, s.checkReplicaIdentity(ctx, []tableName{t}, s.ops[opUpdate] || s.ops[opDelete])
}

// publishAdded makes a discovered table part of the publication: it must
// be capturable, and is added when it is not in it yet.
func (s *Source) publishAdded(ctx context.Context, t tableName) error {
	published, err := s.capturable(ctx, t)
	if err != nil || published {
		return err
	}
	if err := s.exec(ctx, "ALTER PUBLICATION "+quoteIdent(s.cfg.Publication)+" ADD TABLE "+t.quoted()); err != nil {
		return fmt.Errorf("adding %s to publication %q: %w", t, s.cfg.Publication, err)
	}
	s.log.Info("added a table matched by a pattern of tables to the publication", "table", t.String(), "publication", s.cfg.Publication)
	return nil
}

// resetTables sets tables to the names tables lists; connect adds what
// the patterns match.
func (s *Source) resetTables() {
	s.tables = slices.Clone(s.exactTables)
	s.inSet = map[string]bool{}
	for _, t := range s.tables {
		s.inSet[t.String()] = true
	}
}

// patternRules are table_settings given by a pattern.
type patternRules struct {
	p *tablePattern
	r *tableRules
}

// rulesFor returns the table_settings of table name: its own block, or
// the first pattern's that matches it; nil for none.
func (s *Source) rulesFor(name string) *tableRules {
	if r := s.rules[name]; r != nil {
		return r
	}
	if len(s.patternRules) == 0 {
		return nil
	}
	for _, pr := range s.patternRules {
		if pr.p.re.MatchString(name) {
			return pr.r
		}
	}
	return nil
}
