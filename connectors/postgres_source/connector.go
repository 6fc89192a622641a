package postgressource

import (
	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"github.com/picomq/pico-connectors/runtime/plugin"
)

func init() { postgressourceconfig.RegisterSource(New) }

// New builds the source from its generated configuration; Open connects
// and loads the committed state.
func New(cfg postgressourceconfig.Config, env plugin.Env) (plugin.Source, error) {
	return newSource(optionsFrom(cfg, env.Key), env)
}

func optionsFrom(cfg postgressourceconfig.Config, key string) options {
	opt := options{
		ConnString:        cfg.ConnectionString.Reveal(),
		Mode:              string(cfg.Mode),
		Tables:            cfg.Tables,
		BatchSize:         cfg.BatchSize,
		PollInterval:      cfg.PollInterval,
		Slot:              cfg.ReplicationSlot,
		Publication:       cfg.Publication,
		CreateSlot:        cfg.CreateSlot,
		CreatePublication: cfg.CreatePublication,
		CaptureOperations: cfg.CaptureOperations,
		Snapshot:          string(cfg.Snapshot),
		Reader:            string(cfg.CDCReader),
		TrackingColumn:    cfg.TrackingColumn,
		InitialOffset:     cfg.InitialOffset,
		ProcessedColumn:   cfg.ProcessedColumn,
		DeleteAfterRead:   cfg.DeleteAfterRead,
		PrimaryKeyColumn:  cfg.PrimaryKeyColumn,
		IncludeMetadata:   cfg.IncludeMetadata,
		NumericAsString:   cfg.NumericFormat == postgressourceconfig.NumericFormatString,
	}
	opt.slotOptions = slotOptionsFrom(cfg) // slots.go
	if opt.Slot == "" {
		opt.Slot = defaultName(key)
	}
	if opt.Publication == "" {
		opt.Publication = defaultName(key)
	}
	return opt
}
