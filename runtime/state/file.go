package state

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// fileSuffix ends every state file's name; temporary files start with
// tempPrefix and are never read.
const (
	fileSuffix = ".state"
	tempPrefix = ".tmp-"
)

var validKey = regexp.MustCompile(`^[a-z0-9_]+$`)

// FileStore keeps each source's blob in its own file, dir/KEY.state. A
// save writes a temporary file in the same folder, fsyncs it, renames it
// over the old one and fsyncs the folder, so a crash at any point leaves
// either the previous blob or the new one, never a mix.
type FileStore struct {
	dir string
}

// NewFileStore creates dir when needed and removes temporary files a crash
// left behind.
func NewFileStore(dir string) (*FileStore, error) {
	if dir == "" {
		return nil, errors.New("file state store: state.path is empty")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("file state store: cannot create %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("file state store: cannot read %s: %w", dir, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	return &FileStore{dir: dir}, nil
}

// Path returns the file that holds key's blob.
func (s *FileStore) Path(key string) string { return filepath.Join(s.dir, key+fileSuffix) }

func checkKey(key string) error {
	if !validKey.MatchString(key) {
		return fmt.Errorf("state key %q: use lowercase letters, digits and _ only", key)
	}
	return nil
}

// Load returns key's blob, or nil when it has none.
func (s *FileStore) Load(ctx context.Context, key string) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(s.Path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load state of %s: %w", key, err)
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// Save replaces key's blob atomically and durably.
func (s *FileStore) Save(ctx context.Context, key string, blob []byte) (err error) {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	f, err := os.CreateTemp(s.dir, tempPrefix+key+"-*")
	if err != nil {
		return fmt.Errorf("save state of %s: %w", key, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(blob); err != nil {
		return fmt.Errorf("save state of %s: write: %w", key, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("save state of %s: fsync: %w", key, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("save state of %s: close: %w", key, err)
	}
	if err = os.Rename(tmp, s.Path(key)); err != nil {
		return fmt.Errorf("save state of %s: rename: %w", key, err)
	}
	d, err := os.Open(s.dir)
	if err != nil {
		return fmt.Errorf("save state of %s: open folder: %w", key, err)
	}
	defer d.Close()
	if err = d.Sync(); err != nil {
		return fmt.Errorf("save state of %s: fsync folder: %w", key, err)
	}
	return nil
}
