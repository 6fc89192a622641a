package randomsource

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/picomq/pico-connectors/generated/randomsourceconfig"
	"github.com/picomq/pico-connectors/sdk"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

func TestConformance(t *testing.T) {
	sdktest.TestSource(t, func(t *testing.T) (sdk.Source, error) {
		cfg, err := randomsourceconfig.Load(map[string]any{"interval": "10ms", "records_per_batch": int64(5), "max_records": int64(12)}, "", nil)
		if err != nil {
			return nil, err
		}
		return New(cfg, sdktest.Env(t))
	}, sdktest.WithEqual(sameRecordButTime))
}

// sameRecordButTime compares two records but for the payload's ts field:
// a re-read batch keeps its first timestamp, but a new instance resuming
// from the committed state stamps the records it generates anew.
func sameRecordButTime(a, b sdk.Message) bool {
	if string(a.Key) != string(b.Key) || !reflect.DeepEqual(a.Headers, b.Headers) {
		return false
	}
	var pa, pb map[string]any
	if json.Unmarshal(a.Payload, &pa) != nil || json.Unmarshal(b.Payload, &pb) != nil {
		return string(a.Payload) == string(b.Payload)
	}
	delete(pa, "ts")
	delete(pb, "ts")
	return reflect.DeepEqual(pa, pb)
}
