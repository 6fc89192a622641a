package fleet

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/picomq/pico-connectors/runtime/status"
)

// Entry is what GET /sources/{key} and /sinks/{key} return.
type Entry struct {
	Status    string         `json:"status"`
	LastError string         `json:"last_error"`
	Counters  status.Figures `json:"counters"`
	Placement struct {
		Owner      string   `json:"owner"`
		Partitions []string `json:"partitions"`
		Generation int64    `json:"generation"`
	} `json:"placement"`
}

// Entry reads GET /{kind}s/{key} (kind "source" or "sink").
func (r *Runtime) Entry(kind, key string) (Entry, error) {
	var e Entry
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + r.API + "/" + kind + "s/" + key)
	if err != nil {
		return e, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return e, fmt.Errorf("GET /%ss/%s: %s", kind, key, resp.Status)
	}
	return e, json.NewDecoder(resp.Body).Decode(&e)
}

// WaitEntry reads Entry until cond holds for it, for up to limit, and
// returns the last entry read and whether cond held.
func (r *Runtime) WaitEntry(kind, key string, limit time.Duration, cond func(Entry) bool) (Entry, bool) {
	deadline := time.Now().Add(limit)
	var e Entry
	for time.Now().Before(deadline) {
		var err error
		e, err = r.Entry(kind, key)
		if err == nil && cond(e) {
			return e, true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return e, false
}
