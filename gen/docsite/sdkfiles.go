package docsite

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/picomq/pico-connectors/sdk"
)

// readSDKFile reads the page rel (slash-separated) that pico-connectors
// itself writes, such as the schema dialect or the HTTP API reference: from
// root when root is pico-connectors, or else from the pico-connectors
// module that root's module requires, where go list finds it (a replace
// folder or the module cache).
func readSDKFile(root, rel string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return b, err
	}
	dir, lookErr := sdkDir(root)
	if lookErr != nil {
		return nil, fmt.Errorf("%s is in neither %s nor the pico-connectors module: %w", rel, root, lookErr)
	}
	return os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
}

// sdkDir returns the folder of the pico-connectors module that the module
// at root builds with.
func sdkDir(root string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", sdk.ModulePath)
	cmd.Dir = root
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go list -m %s: %v: %s (does the module require it? go get %s)", sdk.ModulePath, err, strings.TrimSpace(errOut.String()), sdk.ModulePath)
	}
	dir := strings.TrimSpace(out.String())
	if dir == "" {
		return "", fmt.Errorf("go list -m %s printed no folder: run go mod download %s", sdk.ModulePath, sdk.ModulePath)
	}
	return dir, nil
}
