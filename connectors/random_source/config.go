package randomsource

import (
	"github.com/picomq/pico-connectors/generated/randomsourceconfig"
	"github.com/picomq/pico-connectors/sdk"
)

func init() { randomsourceconfig.RegisterSource(New) }

// New builds the random source from its generated config. Open reads the
// last committed state ({"next_seq":N}); the source continues from there.
func New(cfg randomsourceconfig.Config, env sdk.Env) (sdk.Source, error) {
	return newSource(cfg), nil
}
