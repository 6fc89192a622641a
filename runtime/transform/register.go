package transform

import (
	"github.com/picomq/pico-connectors/generated/addfieldsconfig"
	"github.com/picomq/pico-connectors/generated/deletefieldsconfig"
	"github.com/picomq/pico-connectors/generated/renamefieldsconfig"
	"github.com/picomq/pico-connectors/sdk"
)

func init() {
	addfieldsconfig.RegisterTransform(func(c addfieldsconfig.Config) (sdk.Transform, error) {
		return AddFields(c.Fields, c.Overwrite), nil
	})
	deletefieldsconfig.RegisterTransform(func(c deletefieldsconfig.Config) (sdk.Transform, error) {
		return DeleteFields(c.Fields), nil
	})
	renamefieldsconfig.RegisterTransform(func(c renamefieldsconfig.Config) (sdk.Transform, error) {
		return RenameFields(c.Fields), nil
	})
}
