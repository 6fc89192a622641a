package transform

import (
	"fmt"

	"github.com/picomq/pico-connectors/sdk"
)

// ApplyAll runs transforms on rec in order, as both loops do between decode
// and encode (sources route in between). The error names the failing
// transform by its index in [[transforms]].
func ApplyAll(transforms []sdk.Transform, rec *sdk.TransformRecord) error {
	for i, t := range transforms {
		if err := t.Apply(rec); err != nil {
			return fmt.Errorf("transforms[%d]: %w", i, err)
		}
	}
	return nil
}
