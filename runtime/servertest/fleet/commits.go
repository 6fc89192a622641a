package fleet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Committed returns a group's committed offsets by topic (partition 0).
func Committed(addr, group string) (map[string]int64, error) {
	cl, err := NewClient(addr)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	res.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.Partition == 0 {
			out[o.Topic] = o.At
		}
	})
	return out, nil
}

// AwaitCommitted waits until the group's commit of every topic in want is
// at least its value; after limit it returns an error naming what is
// behind.
func AwaitCommitted(addr, group string, want map[string]int64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		got, err := Committed(addr, group)
		behind := map[string]string{}
		for tp, n := range want {
			if err != nil || got[tp] < n {
				behind[tp] = fmt.Sprintf("%d of %d", got[tp], n)
			}
		}
		if len(behind) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("group %s after %s: commits behind %v (err %v)", group, limit, behind, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitCommitted is AwaitCommitted for a test: an error fails t.
func WaitCommitted(t testing.TB, addr, group string, want map[string]int64, limit time.Duration) {
	t.Helper()
	if err := AwaitCommitted(addr, group, want, limit); err != nil {
		t.Fatal(err)
	}
}
