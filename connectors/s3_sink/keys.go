package s3sink

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/picomq/pico-connectors/internal/jsonscan"
	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/sdk"
)

// defaultPathTemplate is path_template's default.
const defaultPathTemplate = "{topic}/{date}/{hour}"

// Placeholders lists the placeholders path_template accepts.
var Placeholders = []string{"topic", "topic_segment", "partition", "date", "hour", "timestamp",
	"field", "header", "key", "yyyy", "MM", "dd", "HH", "mm"}

// pathTemplate is a parsed path_template, in confkit's one template
// grammar; templatePart is one literal run or placeholder of it.
type (
	pathTemplate = confkit.Template
	templatePart = confkit.TemplatePart
)

// allowedPlaceholders is Placeholders as confkit.ParseTemplate takes them.
var allowedPlaceholders = []string{"topic", "topic_segment[n]", "partition", "date", "hour", "timestamp",
	"field:path", "header:name", "key", "yyyy", "MM", "dd", "HH", "mm"}

// recordPlaceholders are the placeholders read from each record rather
// than from the first record of a file's group: with any of them, one
// partition writes several files at once.
var recordPlaceholders = []string{"field", "header", "key", "yyyy", "MM", "dd", "HH", "mm"}

// parsePathTemplate parses path_template text. The generated Config
// carries a template parsed by confkit.ParseTemplate; this serves the
// tests and configs built in code, with the same grammar and without the
// path rules the config states (renderDir cleans what they refuse).
func parsePathTemplate(s string) (pathTemplate, error) {
	t, err := confkit.ParsePlaceholders(s, allowedPlaceholders)
	if err != nil {
		return pathTemplate{Source: s}, fmt.Errorf("path_template: %w", err)
	}
	return t, nil
}

// keyLayout is how the directory of an object key is rendered: the
// prefix, path_template, its time zone and the value written for a record
// that lacks a field, header or key.
type keyLayout struct {
	prefix string
	tmpl   pathTemplate
	loc    *time.Location
	// missing is default_partition_value.
	missing string
	// paths holds the split path of each {field:...} part, by part index.
	paths [][]string
	// perRecord: the template reads recordPlaceholders; readsFields: it
	// has a {field:...}.
	perRecord, readsFields bool
	// cuts holds, by part index, the time cut of a {field:PATH:day} or
	// {field:PATH:hour} part; the zero fieldCut for the others.
	cuts []fieldCut
	// fields reads {field:...} from payloads that are not JSON (SetTopics
	// sets keys_avro's, for Avro topics); nil: JSON only.
	fields payloadFields
	text   []byte // scratch space of a field's text
}

// fieldCut is how {field:PATH:day} and {field:PATH:hour} cut files by a
// payload time: by is the day or the hour (cutNone: a plain
// {field:PATH}), unit how a number at PATH counts time.
type fieldCut struct {
	by   timeCut
	unit timeUnit
}

// timeCut is the day or the hour of a {field:PATH:day|hour} part.
type timeCut int

const (
	cutNone timeCut = iota
	cutDay
	cutHour
)

// timeUnit is how a number at a cut field's path counts time: epoch
// milliseconds (the default, and a timestamp_ms column's), microseconds (a
// timestamp_us column's), or days (a date column's, which also takes
// YYYY-MM-DD rather than RFC 3339).
type timeUnit int

const (
	unitMillis timeUnit = iota
	unitMicros
	unitDays
)

// at is the time n counts in unit u.
func (u timeUnit) at(n int64) time.Time {
	switch u {
	case unitDays:
		return time.Unix(n*86400, 0)
	case unitMicros:
		return time.UnixMicro(n)
	}
	return time.UnixMilli(n)
}

// cutSuffixes are the time cuts a {field:...} part may end with.
var cutSuffixes = map[string]timeCut{"day": cutDay, "hour": cutHour}

// fieldParam splits the text of a {field:...} part into the path and
// the time cut: {field:PATH:day} and {field:PATH:hour} cut PATH's time
// (a path may itself hold ':', which stays part of it otherwise).
func fieldParam(param string) (path string, by timeCut) {
	if i := strings.LastIndexByte(param, ':'); i > 0 {
		if c, ok := cutSuffixes[param[i+1:]]; ok {
			return param[:i], c
		}
	}
	return param, cutNone
}

// payloadFields reads path_template's {field:...} parts from records whose
// payload is not JSON.
type payloadFields interface {
	// read decodes rec's field values, and reports whether rec is one it
	// reads (when not, {field:...} looks the path up in JSON).
	read(rec *sdk.Record) bool
	// appendField appends the text of part i's value in the record read
	// last; nothing when the value is null, has no text or did not decode.
	appendField(dst []byte, i int) []byte
	// fieldTime returns the time of part i's value in the record read
	// last, for a {field:PATH:day|hour} part; false when the value is
	// null, no time or did not decode.
	fieldTime(i int) (time.Time, bool)
}

// newKeyLayout prepares the rendering of t; loc nil means UTC.
func newKeyLayout(prefix string, t pathTemplate, loc *time.Location, missing string) *keyLayout {
	if loc == nil {
		loc = time.UTC
	}
	l := &keyLayout{prefix: prefix, tmpl: t, loc: loc, missing: missing, paths: make([][]string, len(t.Parts)), cuts: make([]fieldCut, len(t.Parts))}
	for i, p := range t.Parts {
		if p.Name == "field" {
			path, by := fieldParam(p.Param)
			l.paths[i] = strings.Split(strings.Trim(path, "."), ".")
			l.cuts[i].by = by
			l.readsFields = true
		}
		l.perRecord = l.perRecord || slices.Contains(recordPlaceholders, p.Name)
	}
	return l
}

// renderDir renders <prefix>/<path_template>/ in UTC for a file whose
// first record has the given topic, partition and time, and no record
// values (they render as __unknown).
func renderDir(prefix string, t pathTemplate, topic string, partition int32, first time.Time) (string, error) {
	l := newKeyLayout(prefix, t, time.UTC, "__unknown")
	b, err := l.appendDir(nil, &sdk.Record{Topic: topic, Partition: partition, Timestamp: first}, first)
	return string(b), err
}

// keepByte reports whether b is kept as it is in a key.
func keepByte(b byte) bool {
	return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9') ||
		b == '.' || b == '_' || b == '-'
}

// appendSanitized appends s with every character other than ASCII
// letters, digits, '.', '_' and '-' replaced by '_': one '_' per
// character, and one per byte that is not valid UTF-8.
func appendSanitized[T string | []byte](dst []byte, s T) []byte {
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if keepByte(b) {
				dst = append(dst, b)
			} else {
				dst = append(dst, '_')
			}
			i++
			continue
		}
		_, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		dst = append(dst, '_')
		i += size
	}
	return dst
}

// fileInfo is what an object key is rendered from.
type fileInfo struct {
	Topic       string
	Partition   int32
	FirstOffset int64
	LastOffset  int64
	FirstTime   time.Time
}

// objectKey renders <prefix>/<path_template>/<partition>-<first>-<last>.<ext>.
// It fails when the template asks for a topic segment the topic lacks.
func objectKey(prefix string, t pathTemplate, f fileInfo, ext string) (string, error) {
	dir, err := renderDir(prefix, t, f.Topic, f.Partition, f.FirstTime)
	if err != nil {
		return "", err
	}
	return fileKey(dir, f.Partition, f.FirstOffset, f.LastOffset, ext), nil
}

// appendDir appends the directory part of the key of rec, with its
// trailing slash (nothing when the prefix and the rendered template are
// both empty): <prefix>/<path_template>/. The placeholders of the file's
// group ({date}, {hour}, {timestamp}) take group, the time of the group's
// first record; the others read rec ({field:...} from its Avro binary on
// an Avro topic, from its JSON otherwise). It fails when the template asks for
// a topic segment the topic lacks.
func (l *keyLayout) appendDir(dst []byte, rec *sdk.Record, group time.Time) ([]byte, error) {
	if l.prefix != "" {
		dst = append(dst, l.prefix...)
		dst = append(dst, '/')
	}
	mark := len(dst)
	gt := group.In(l.loc)
	var rt time.Time
	var year, day int
	var month time.Month
	if l.perRecord {
		rt = rec.Timestamp.In(l.loc)
		year, month, day = rt.Date()
	}
	other := l.readsFields && l.fields != nil && l.fields.read(rec)
	for i, p := range l.tmpl.Parts {
		switch p.Name {
		case "":
			dst = append(dst, p.Text...)
		case "topic":
			dst = appendSanitized(dst, rec.Topic)
		case "topic_segment":
			seg, err := topicSegment(rec.Topic, p.Arg)
			if err != nil {
				return dst, err
			}
			dst = appendSanitized(dst, seg)
		case "partition":
			dst = strconv.AppendInt(dst, int64(rec.Partition), 10)
		case "date":
			dst = gt.AppendFormat(dst, "2006-01-02")
		case "hour":
			dst = gt.AppendFormat(dst, "15")
		case "timestamp":
			dst = strconv.AppendInt(dst, group.UnixMilli(), 10)
		case "yyyy":
			dst = appendPadded(dst, int64(year), 4)
		case "MM":
			dst = appendPadded(dst, int64(month), 2)
		case "dd":
			dst = appendPadded(dst, int64(day), 2)
		case "HH":
			dst = appendPadded(dst, int64(rt.Hour()), 2)
		case "mm":
			dst = appendPadded(dst, int64(rt.Minute()), 2)
		case "field":
			if by := l.cuts[i].by; by != cutNone {
				var t time.Time
				var ok bool
				if other {
					t, ok = l.fields.fieldTime(i)
				} else {
					t, ok = l.jsonTime(rec.Payload, i)
				}
				dst = l.appendCut(dst, t, ok, by)
			} else if other {
				l.text = l.fields.appendField(l.text[:0], i)
				dst = l.appendValue(dst, l.text)
			} else {
				dst = l.appendValue(dst, fieldText(rec.Payload, l.paths[i]))
			}
		case "header":
			var v []byte
			for _, h := range rec.Headers {
				if h.Key == p.Param {
					v = h.Value
					break
				}
			}
			dst = l.appendValue(dst, v)
		case "key":
			dst = l.appendValue(dst, rec.Key)
		}
	}
	// Keep the directory part free of leading, trailing and doubled
	// slashes, so an empty placeholder or template leaves no empty segment,
	// and of "." and ".." segments (a topic named ".."), which tools that
	// map keys to paths take for this folder or its parent.
	dir := dst[mark:]
	if !cleanDir(dir) {
		clean := strings.Trim(string(dir), "/")
		for strings.Contains(clean, "//") {
			clean = strings.ReplaceAll(clean, "//", "/")
		}
		dst = append(dst[:mark], sanitizeDotSegments(clean)...)
		dir = dst[mark:]
	}
	if len(dir) > 0 {
		dst = append(dst, '/')
	}
	return dst, nil
}

// cleanDir reports whether dir has no leading, trailing or doubled slash
// and no segment that is only dots, the common case, which appendDir
// then keeps as it is.
func cleanDir(dir []byte) bool {
	start := 0
	for i := 0; i <= len(dir); i++ {
		if i < len(dir) && dir[i] != '/' {
			continue
		}
		seg := dir[start:i]
		if len(seg) == 0 && len(dir) > 0 || len(seg) > 0 && len(seg) <= 2 && strings.Trim(string(seg), ".") == "" {
			return false
		}
		start = i + 1
	}
	return true
}

// appendValue appends a value read from a record, sanitised, or
// default_partition_value when it is empty.
func (l *keyLayout) appendValue(dst, v []byte) []byte {
	if len(v) == 0 {
		return append(dst, l.missing...)
	}
	return appendSanitized(dst, v)
}

// appendCut appends the UTC day (2026-12-04) or hour (2026-12-04-13) of
// t, Iceberg's human-readable forms of its day and hour transforms, or
// default_partition_value when there is no time (!ok).
func (l *keyLayout) appendCut(dst []byte, t time.Time, ok bool, by timeCut) []byte {
	switch {
	case !ok:
		return append(dst, l.missing...)
	case by == cutHour:
		return t.UTC().AppendFormat(dst, "2006-01-02-15")
	}
	return t.UTC().AppendFormat(dst, time.DateOnly)
}

// jsonTime reads the time of cut part i in a JSON payload with the parquet
// columns' own parser (jsonTimestamp, jsonDate), so that a file's
// directory has the day or hour of the value its column holds: an RFC 3339
// string, or a number of the part's unit (a date column's YYYY-MM-DD or
// days). False when the value is missing, null or not a time.
func (l *keyLayout) jsonTime(payload []byte, i int) (time.Time, bool) {
	raw, ok := jsonscan.Lookup(payload, l.paths[i])
	if !ok || len(raw) == 0 || string(raw) == "null" {
		return time.Time{}, false
	}
	u := l.cuts[i].unit
	var n int64
	var err error
	if u == unitDays {
		n, err = jsonDate(raw)
	} else {
		n, err = jsonTimestamp(raw, u == unitMicros)
	}
	return u.at(n), err == nil
}

// setUnits takes the unit of each cut part from unitOf, given the part's
// dotted path.
func (l *keyLayout) setUnits(unitOf func(path string) timeUnit) {
	for i, path := range l.paths {
		if path != nil && l.cuts[i].by != cutNone {
			l.cuts[i].unit = unitOf(strings.Join(path, "."))
		}
	}
}

// checkFieldCuts refuses a {field:PATH:SUFFIX} whose suffix looks like a
// time cut but is not day or hour (such as month or Day), which would
// otherwise read a field literally named "PATH:SUFFIX".
func checkFieldCuts(t pathTemplate) error {
	for _, p := range t.Parts {
		if p.Name != "field" {
			continue
		}
		i := strings.LastIndexByte(p.Param, ':')
		if i < 0 {
			continue
		}
		suffix := p.Param[i+1:]
		if _, ok := cutSuffixes[suffix]; ok {
			continue
		}
		switch strings.TrimSuffix(strings.ToLower(suffix), "s") {
		case "year", "month", "day", "hour", "minute", "date", "week":
			return confkit.Problems{{Key: "path_template", Value: t.Source, Rule: "path_template",
				Message: fmt.Sprintf("path_template '%s': {field:%s} ends in ':%s', which is not a time cut: write {field:%s:day} or {field:%s:hour} (the UTC day or hour of the field's time)", t.Source, p.Param, suffix, p.Param[:i], p.Param[:i])}}
		}
	}
	return nil
}

// fieldText returns the text of the JSON value at path in payload: a
// string's text, a number's or a boolean's JSON text; nil when it is
// missing, null, an object or an array, or the payload is no JSON object.
func fieldText(payload []byte, path []string) []byte {
	raw, ok := jsonscan.Lookup(payload, path)
	if !ok || len(raw) == 0 {
		return nil
	}
	switch raw[0] {
	case '"':
		if body := raw[1 : len(raw)-1]; bytes.IndexByte(body, '\\') < 0 {
			return body
		}
		text, _ := jsonscan.AppendUnquoted(nil, raw)
		return text
	case '{', '[', 'n':
		return nil
	}
	return raw
}

// sanitizeDotSegments returns dir with each "." or ".." segment replaced
// by one '_' per dot, as appendSanitized replaces other characters.
func sanitizeDotSegments(dir string) string {
	segs := strings.Split(dir, "/")
	for i, seg := range segs {
		if seg == "." || seg == ".." {
			segs[i] = strings.Repeat("_", len(seg))
		}
	}
	return strings.Join(segs, "/")
}

// filePrefix returns the key of a file up to its last offset:
// dir + <partition 5d>-<first 20d>-. Every object a file starting at
// first could have been uploaded as begins with it.
func filePrefix(dir string, partition int32, first int64) string {
	dst := make([]byte, 0, len(dir)+48)
	dst = append(dst, dir...)
	dst = appendPadded(dst, int64(partition), 5)
	dst = append(dst, '-')
	dst = appendPadded(dst, first, 20)
	return string(append(dst, '-'))
}

// fileKey returns filePrefix followed by <last 20d>.<ext>.
func fileKey(dir string, partition int32, first, last int64, ext string) string {
	dst := []byte(filePrefix(dir, partition, first))
	dst = appendPadded(dst, last, 20)
	dst = append(dst, '.')
	return string(append(dst, ext...))
}

// lastOffsetOf parses the last offset of a key that starts with prefix
// (a filePrefix), and reports whether the key is a data file of that form.
func lastOffsetOf(key, prefix string) (int64, bool) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok || len(rest) < 21 || rest[20] != '.' || strings.HasSuffix(rest, LostSuffix) {
		return 0, false
	}
	n, err := strconv.ParseInt(rest[:20], 10, 64)
	return n, err == nil
}

// offsetsOf parses the first and last offsets of a data file key that
// starts with prefix (dir + <partition 5d>-).
func offsetsOf(key, prefix string) (first, last int64, ok bool) {
	rest, found := strings.CutPrefix(key, prefix)
	if !found || len(rest) < 42 || rest[20] != '-' {
		return 0, 0, false
	}
	first, err := strconv.ParseInt(rest[:20], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	last, ok = lastOffsetOf(rest, rest[:21])
	return first, last, ok
}

// topicSegment returns segment n of topic split on '.', counting from the
// end when n is negative.
func topicSegment(topic string, n int) (string, error) {
	segs := strings.Split(topic, ".")
	i := n
	if n < 0 {
		i = len(segs) + n
	}
	if i < 0 || i >= len(segs) {
		return "", fmt.Errorf("topic '%s' has %d segment(s) split on '.', but path_template asks for {topic_segment[%d]}", topic, len(segs), n)
	}
	return segs[i], nil
}

// appendPadded appends n zero-padded to width digits.
func appendPadded(dst []byte, n int64, width int) []byte {
	if n < 0 {
		dst = append(dst, '-')
		n = -n
		width--
	}
	var buf [24]byte
	s := strconv.AppendInt(buf[:0], n, 10)
	for i := len(s); i < width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}

// trimPrefix trims surrounding slashes from prefix.
func trimPrefix(prefix string) string { return strings.Trim(prefix, "/") }

// LostSuffix ends the key of the marker written, in buffered delivery, for
// a file that could not be uploaded.
const LostSuffix = ".lost"
