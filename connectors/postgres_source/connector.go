package postgressource

import (
	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"github.com/picomq/pico-connectors/sdk"
)

func init() { postgressourceconfig.RegisterSource(New, check) }

// New builds the source from its generated configuration; Open connects
// and loads the committed state.
func New(cfg postgressourceconfig.Config, env sdk.Env) (sdk.Source, error) {
	return newSource(withNames(cfg, env.Key), env)
}

// withNames sets replication_slot and publication, when they are not set,
// to picomq_ and the connector key: a default the schema cannot state, as
// it depends on the key.
func withNames(cfg postgressourceconfig.Config, key string) postgressourceconfig.Config {
	if cfg.ReplicationSlot == "" {
		cfg.ReplicationSlot = defaultName(key)
	}
	if cfg.Publication == "" {
		cfg.Publication = defaultName(key)
	}
	return cfg
}
