package s3sink

import (
	"os"
	"testing"

	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
)

// TestMain removes the binary runtimebin.Build compiled, once every test
// that runs it is done: the black-box tests share one build.
func TestMain(m *testing.M) {
	code := m.Run()
	runtimebin.Remove()
	os.Exit(code)
}
