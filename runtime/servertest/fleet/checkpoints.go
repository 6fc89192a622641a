package fleet

import (
	"encoding/json"
	"fmt"
	"testing"
)

// ReadCheckpoints reads the committed checkpoints of source key from the
// broker state store (topic pico-connectors.state.KEY, read_committed) and
// checks, with pos giving each one's position, that they never go
// backwards. It returns them, and an error naming the first that does, or
// saying why they could not be read.
func ReadCheckpoints(addr, key string, pos func(blob []byte) (uint64, error)) ([][]byte, error) {
	cps, err := ReadTopic(addr, "pico-connectors.state."+key)
	if err != nil {
		return nil, err
	}
	return inOrder(key, cps, pos)
}

// Checkpoints is ReadCheckpoints for a test: failing to read them fails t;
// checkpoints going backwards is the error returned.
func Checkpoints(t testing.TB, addr, key string, pos func(blob []byte) (uint64, error)) ([][]byte, error) {
	t.Helper()
	return inOrder(key, ReadCommitted(t, addr, "pico-connectors.state."+key), pos)
}

// inOrder checks that the checkpoints cps of source key never go backwards.
func inOrder(key string, cps [][]byte, pos func(blob []byte) (uint64, error)) ([][]byte, error) {
	if len(cps) == 0 {
		return nil, fmt.Errorf("source %s: no checkpoint committed", key)
	}
	var last uint64
	for i, cp := range cps {
		p, err := pos(cp)
		if err != nil {
			return cps, fmt.Errorf("source %s: checkpoint %d %.200q: %v", key, i, cp, err)
		}
		if p < last {
			return cps, fmt.Errorf("source %s: checkpoint %d (%.200s) is behind the one before it (position %d < %d): a stale owner saved state", key, i, cp, p, last)
		}
		last = p
	}
	return cps, nil
}

// RandomPos is the position of a random source checkpoint: next_seq.
func RandomPos(blob []byte) (uint64, error) {
	var s struct {
		NextSeq *uint64 `json:"next_seq"`
	}
	if err := json.Unmarshal(blob, &s); err != nil {
		return 0, err
	}
	if s.NextSeq == nil {
		return 0, fmt.Errorf("no next_seq")
	}
	return *s.NextSeq, nil
}

// CDCPos is the position of a Postgres CDC checkpoint: its LSN (0 while
// the snapshot runs).
func CDCPos(blob []byte) (uint64, error) {
	var s struct {
		LSN string `json:"lsn"`
	}
	if err := json.Unmarshal(blob, &s); err != nil {
		return 0, err
	}
	if s.LSN == "" {
		return 0, nil
	}
	var hi, lo uint64
	if _, err := fmt.Sscanf(s.LSN, "%X/%X", &hi, &lo); err != nil {
		return 0, fmt.Errorf("lsn %q: %v", s.LSN, err)
	}
	return hi<<32 | lo, nil
}
