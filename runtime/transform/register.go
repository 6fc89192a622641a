package transform

import (
	"github.com/picomq/pico-connectors/generated/addfieldsconfig"
	"github.com/picomq/pico-connectors/generated/deletefieldsconfig"
	"github.com/picomq/pico-connectors/generated/renamefieldsconfig"
	"github.com/picomq/pico-connectors/runtime/plugin"
)

func init() {
	addfieldsconfig.RegisterTransform(func(c addfieldsconfig.Config) (plugin.Transform, error) {
		return AddFields(c.Fields, c.Overwrite), nil
	})
	deletefieldsconfig.RegisterTransform(func(c deletefieldsconfig.Config) (plugin.Transform, error) {
		return DeleteFields(c.Fields), nil
	})
	renamefieldsconfig.RegisterTransform(func(c renamefieldsconfig.Config) (plugin.Transform, error) {
		return RenameFields(c.Fields), nil
	})
}
