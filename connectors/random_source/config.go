package randomsource

import (
	"github.com/picomq/pico-connectors/generated/randomsourceconfig"
	"github.com/picomq/pico-connectors/runtime/plugin"
)

func init() { randomsourceconfig.RegisterSource(New) }

// New builds the random source from its generated config. Open reads the
// last committed state ({"next_seq":N}); the source continues from there.
func New(cfg randomsourceconfig.Config, env plugin.Env) (plugin.Source, error) {
	return newSource(optionsFrom(cfg)), nil
}

// optionsFrom turns the generated Config (already validated against the
// schema, defaults applied) into the options the code uses.
func optionsFrom(cfg randomsourceconfig.Config) options {
	opt := options{
		RecordsPerBatch: cfg.RecordsPerBatch,
		PayloadSize:     int(cfg.PayloadSize.Bytes()),
		Interval:        cfg.Interval,
		KeyShape:        string(cfg.KeyShape),
		KeySize:         cfg.KeySize,
		PayloadShape:    string(cfg.PayloadShape),
		Seed:            1,
	}
	if opt.RecordsPerBatch <= 0 {
		opt.RecordsPerBatch = 100
	}
	if opt.KeyShape == "" {
		opt.KeyShape = keySequence
	}
	if opt.PayloadShape == "" {
		opt.PayloadShape = payloadJSON
	}
	if opt.KeySize <= 0 {
		opt.KeySize = 16
	}
	if cfg.MaxRecords != nil {
		opt.MaxRecords = int64(*cfg.MaxRecords)
	}
	if cfg.Seed != nil {
		opt.Seed = uint64(*cfg.Seed)
	}
	return opt
}
