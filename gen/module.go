package gen

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// FindRoot returns the nearest folder from dir up that holds a go.mod.
func FindRoot(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := abs; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod in %s or any folder above it: run picogen inside the Go module (or pass its root with -root)", abs)
		}
	}
}

// RootOrFind returns root, or when it is empty the module root FindRoot
// finds from the working directory.
func RootOrFind(root string) (string, error) {
	if root != "" {
		return root, nil
	}
	return FindRoot(".")
}

// ModulePath reads the module path from root/go.mod.
func ModulePath(root string) (string, error) {
	f, err := os.Open(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("no go.mod in %s: run picogen from the module root (or pass it with -root)", root)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	return "", fmt.Errorf("%s has no module line", filepath.Join(root, "go.mod"))
}
