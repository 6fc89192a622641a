package broker

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// PasswordFile is the file in the data dir that keeps a generated
// password (see GeneratedPassword).
const PasswordFile = "embedded-password"

// GeneratedPassword returns the password kept in dataDir/PasswordFile,
// creating the file (0600) with 32 random bytes, base64url, when it is
// missing. With no dataDir the password is random and kept nowhere: only
// this process's clients can log in. The password is never in an error.
func GeneratedPassword(dataDir string) (string, error) {
	if dataDir == "" {
		return newPassword(), nil
	}
	path := filepath.Join(dataDir, PasswordFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		pw := strings.TrimSpace(string(b))
		if pw == "" {
			return "", fmt.Errorf("%s is empty: delete it to generate another password, or set broker.embedded_password", path)
		}
		return pw, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", err
	}
	pw := newPassword()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(pw + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return pw, nil
}

func newPassword() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}
