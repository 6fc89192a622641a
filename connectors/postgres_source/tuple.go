package postgressource

import (
	"encoding/binary"
	"errors"
)

// A zero-copy reader for the tuple messages of pgoutput (Insert, Update,
// Delete), the bulk of a stream. pglogrepl copies every column value into
// its own allocation; these values point into the peek's row buffer and
// are encoded before the next row is read. Other messages go through
// pglogrepl.Parse.

// tupleCol is one column of a tuple: kind is 'n' (NULL), 'u' (unchanged
// TOAST value), 't' (text) or 'b' (binary).
type tupleCol struct {
	kind byte
	data []byte
}

// tuple is the columns of one row image.
type tuple struct{ cols []tupleCol }

// change is a decoded Insert, Update or Delete.
type change struct {
	relID   uint32
	oldKind byte // 0, 'K' (key columns only) or 'O' (whole old row)
	old     tuple
	new     tuple
}

var errShortTuple = errors.New("truncated pgoutput tuple")

// readTuple reads TupleData from src into t, returning the bytes used.
func readTuple(src []byte, t *tuple) (int, error) {
	if len(src) < 2 {
		return 0, errShortTuple
	}
	n := int(binary.BigEndian.Uint16(src))
	pos := 2
	t.cols = t.cols[:0]
	for i := 0; i < n; i++ {
		if pos >= len(src) {
			return 0, errShortTuple
		}
		c := tupleCol{kind: src[pos]}
		pos++
		if c.kind == 't' || c.kind == 'b' {
			if pos+4 > len(src) {
				return 0, errShortTuple
			}
			l := int(binary.BigEndian.Uint32(src[pos:]))
			pos += 4
			if l < 0 || pos+l > len(src) {
				return 0, errShortTuple
			}
			c.data = src[pos : pos+l : pos+l]
			pos += l
		}
		t.cols = append(t.cols, c)
	}
	return pos, nil
}

// readChange decodes an 'I', 'U' or 'D' message (data[0] is the type).
func readChange(data []byte, c *change) error {
	if len(data) < 6 {
		return errShortTuple
	}
	c.relID = binary.BigEndian.Uint32(data[1:])
	c.oldKind = 0
	c.old.cols = c.old.cols[:0]
	c.new.cols = c.new.cols[:0]
	pos := 5
	kind := data[pos]
	pos++
	switch data[0] {
	case 'I':
		if kind != 'N' {
			return errShortTuple
		}
		_, err := readTuple(data[pos:], &c.new)
		return err
	case 'U':
		if kind == 'K' || kind == 'O' {
			c.oldKind = kind
			n, err := readTuple(data[pos:], &c.old)
			if err != nil {
				return err
			}
			pos += n
			if pos >= len(data) || data[pos] != 'N' {
				return errShortTuple
			}
			pos++
		} else if kind != 'N' {
			return errShortTuple
		}
		_, err := readTuple(data[pos:], &c.new)
		return err
	case 'D':
		if kind != 'K' && kind != 'O' {
			return errShortTuple
		}
		c.oldKind = kind
		_, err := readTuple(data[pos:], &c.old)
		return err
	}
	return errShortTuple
}
