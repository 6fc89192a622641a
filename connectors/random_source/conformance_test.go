package randomsource

import (
	"testing"

	"github.com/picomq/pico-connectors/generated/randomsourceconfig"
	"github.com/picomq/pico-connectors/runtime/connectortest/sourcetest"
	"github.com/picomq/pico-connectors/runtime/plugin"
)

func TestConformance(t *testing.T) {
	sourcetest.Run(t, func(t *testing.T, state []byte) (plugin.Source, error) {
		cfg, err := randomsourceconfig.Load(map[string]any{"interval": "10ms", "records_per_batch": int64(5), "max_records": int64(12)}, "", nil)
		if err != nil {
			return nil, err
		}
		return New(cfg, sourcetest.Env(t, state))
	})
}
