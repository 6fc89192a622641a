package compat

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// GitList returns the *.json files directly in folder dir/folder as
// committed at rev, as slash paths relative to dir.
func GitList(dir, rev, folder string) ([]string, error) {
	if strings.HasPrefix(rev, "-") {
		return nil, fmt.Errorf("bad revision %q", rev)
	}
	var out, errb bytes.Buffer
	cmd := exec.Command("git", "-C", dir, "ls-tree", "--name-only", rev+":./"+folder)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := errb.String()
		if strings.Contains(msg, "Not a valid object name") || strings.Contains(msg, "does not exist") || strings.Contains(msg, "not a tree object") {
			return nil, nil
		}
		return nil, fmt.Errorf("git ls-tree %s:%s: %s", rev, folder, strings.TrimSpace(msg))
	}
	var files []string
	for _, name := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if strings.HasSuffix(name, ".json") {
			files = append(files, folder+"/"+name)
		}
	}
	return files, nil
}

// GitShow reads path as committed at rev in the repository at dir. found is
// false when the revision exists but has no such file.
func GitShow(dir, rev, path string) (content []byte, found bool, err error) {
	if strings.HasPrefix(rev, "-") {
		return nil, false, fmt.Errorf("bad revision %q", rev)
	}
	rel := filepath.ToSlash(filepath.Clean(path))
	var out, errb bytes.Buffer
	cmd := exec.Command("git", "-C", dir, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, false, fmt.Errorf("git revision %q not found in %s", rev, dir)
	}
	out.Reset()
	errb.Reset()
	cmd = exec.Command("git", "-C", dir, "show", rev+":./"+rel)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := errb.String()
		if strings.Contains(msg, "does not exist") || strings.Contains(msg, "exists on disk, but not in") {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("git show %s:%s: %s", rev, rel, strings.TrimSpace(msg))
	}
	return out.Bytes(), true, nil
}
