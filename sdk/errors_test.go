package sdk_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/picomq/pico-connectors/sdk"
)

func TestPermanent(t *testing.T) {
	base := errors.New("table orders was dropped")
	err := fmt.Errorf("poll: %w", sdk.Permanent(base))
	if !sdk.IsPermanent(err) {
		t.Fatal("IsPermanent is false for a wrapped Permanent error")
	}
	if !errors.Is(err, base) || err.Error() != "poll: table orders was dropped" {
		t.Fatalf("Permanent changed the error: %v", err)
	}
	if sdk.IsPermanent(base) || sdk.IsPermanent(nil) || sdk.Permanent(nil) != nil {
		t.Fatal("an unmarked error, or nil, is permanent")
	}
}
