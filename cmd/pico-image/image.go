package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image holds, and where.
const (
	binaryPath = "/usr/local/bin/pico-connectors"
	workDir    = "/var/lib/pico-connectors"
	configDir  = "/etc/pico-connectors"
	caBundle   = "/etc/ssl/certs/ca-certificates.crt"
	apiPort    = "8081/tcp"
	// uid and gid of the image's user, "pico": not root, and the number
	// distroless images use for their non-root user.
	userID   = 65532
	userName = "pico"
)

// spec says what to build from: the checkout, the labels and the tag,
// and the one time every file and the image carry.
type spec struct {
	// Root is the module's root folder, where go build runs.
	Root     string
	Version  string
	Revision string
	Source   string
	// Epoch is SOURCE_DATE_EPOCH: the time of every file, of the image
	// and of its history, so that one commit gives one digest.
	Epoch time.Time
	// Tag names the image for docker load and podman load, such as
	// picomq/pico-connectors:latest.
	Tag string
}

// buildFlags build the image's pico-connectors: no paths of this machine
// (-trimpath), no VCS stamp (which changes with an untracked file; the
// labels carry the revision), the time zone database inside the binary
// (timetzdata) and no symbol table (-s -w: 16 MB less; stack traces keep
// their function names and lines).
var buildFlags = []string{"-trimpath", "-buildvcs=false", "-tags", "timetzdata", "-ldflags", "-s -w"}

// buildBinary compiles cmd/pico-connectors (cgo: librdkafka) into dir.
func buildBinary(root, dir string) (string, error) {
	out := filepath.Join(dir, "pico-connectors")
	args := append([]string{"build"}, buildFlags...)
	cmd := exec.Command("go", append(args, "-o", out, "./cmd/pico-connectors")...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/pico-connectors: %v\n%s", err, b)
	}
	return out, nil
}

// entry is one file or folder of a layer.
type entry struct {
	name     string // absolute path in the image
	mode     int64  // permission bits, with 01000 for sticky
	uid, gid int
	dir      bool
	data     []byte
}

// sharedLibraries returns the shared libraries ldd names for bin, the
// dynamic loader included, each at the path ldd names and with the
// content of the file that path resolves to. A static binary needs none.
func sharedLibraries(bin string) ([]entry, error) {
	out, err := exec.Command("ldd", bin).CombinedOutput()
	text := string(out)
	if err != nil {
		if strings.Contains(text, "not a dynamic executable") || strings.Contains(text, "statically linked") {
			return nil, nil
		}
		return nil, fmt.Errorf("ldd %s: %v\n%s", bin, err, text)
	}
	var libs []entry
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.Contains(line, "not found") {
			return nil, fmt.Errorf("ldd %s: a library is missing: %s", bin, line)
		}
		p := line
		if _, after, ok := strings.Cut(line, "=>"); ok {
			p = strings.TrimSpace(after)
		}
		p, _, _ = strings.Cut(p, " (")
		if !strings.HasPrefix(p, "/") {
			continue // linux-vdso.so.1: the kernel maps it
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, fmt.Errorf("library %s: %v", p, err)
		}
		data, err := os.ReadFile(real)
		if err != nil {
			return nil, fmt.Errorf("library %s: %v", p, err)
		}
		libs = append(libs, entry{name: p, mode: 0o755, data: data})
	}
	return libs, nil
}

// baseFiles are the image's files besides the binary: its user and group,
// name resolution for glibc, CA certificates, the libraries, the working
// directory (the user's, where relative state and broker-data folders go),
// the folder the config is mounted on, and /tmp.
func baseFiles(libs []entry) ([]entry, error) {
	certs, err := os.ReadFile(caBundle)
	if err != nil {
		return nil, fmt.Errorf("CA certificates: %v (install the ca-certificates package)", err)
	}
	files := []entry{
		{name: "/etc/passwd", mode: 0o644, data: fmt.Appendf(nil,
			"root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:pico-connectors:%s:/sbin/nologin\n", userName, userID, userID, workDir)},
		{name: "/etc/group", mode: 0o644, data: fmt.Appendf(nil, "root:x:0:\n%s:x:%d:\n", userName, userID)},
		{name: "/etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{name: "/etc/hosts", mode: 0o644, data: []byte("127.0.0.1\tlocalhost\n::1\tlocalhost\n")},
		{name: caBundle, mode: 0o644, data: certs},
		{name: configDir, mode: 0o755, dir: true},
		{name: workDir, mode: 0o750, dir: true, uid: userID, gid: userID},
		{name: "/tmp", mode: 0o1777, dir: true},
	}
	return append(files, libs...), nil
}

// layerTar writes files as an uncompressed layer (or any tar of the
// image's, such as the tarball itself): every parent folder
// (root-owned, 0755) unless listed, entries sorted by path, each with the
// time epoch and no user or group names, so the bytes depend on the files
// alone.
func layerTar(files []entry, epoch time.Time) ([]byte, error) {
	all := map[string]entry{}
	for _, f := range files {
		all[f.name] = f
		for d := path.Dir(f.name); d != "/"; d = path.Dir(d) {
			if _, ok := all[d]; !ok {
				all[d] = entry{name: d, mode: 0o755, dir: true}
			}
		}
	}
	for _, f := range files { // listed folders win over made-up parents
		all[f.name] = f
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		f := all[n]
		h := &tar.Header{Name: strings.TrimPrefix(n, "/"), Mode: f.mode, Uid: f.uid, Gid: f.gid,
			ModTime: epoch, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// gzipLayer is a layer of tarBytes, gzipped once, with Docker's layer
// media type (see build).
func gzipLayer(tarBytes []byte) (v1.Layer, error) {
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(tarBytes)), nil
	}, tarball.WithMediaType(types.DockerLayer), tarball.WithCompressedCaching)
}

// image assembles the image: a base layer and the binary's layer, the
// config (user, working directory, entrypoint, port, labels) and the time
// s.Epoch everywhere. It uses Docker's media types: `crane push` of the
// tarball (which reads its manifest.json) then pushes a manifest with the
// same bytes, so the same digest, as the OCI index names.
func image(s spec, bin []byte, libs []entry) (v1.Image, error) {
	base, err := baseFiles(libs)
	if err != nil {
		return nil, err
	}
	baseTar, err := layerTar(base, s.Epoch)
	if err != nil {
		return nil, err
	}
	binTar, err := layerTar([]entry{{name: binaryPath, mode: 0o755, data: bin}}, s.Epoch)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: s.Epoch}
	var adds []mutate.Addendum
	for _, l := range []struct {
		tar []byte
		by  string
	}{
		{baseTar, "pico-image: user, CA certificates, shared libraries, folders"},
		{binTar, "pico-image: " + binaryPath},
	} {
		layer, err := gzipLayer(l.tar)
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.Addendum{Layer: layer, MediaType: types.DockerLayer,
			History: v1.History{Created: created, CreatedBy: l.by}})
	}
	img := mutate.MediaType(empty.Image, types.DockerManifestSchema2)
	img = mutate.ConfigMediaType(img, types.DockerConfigJSON)
	img, err = mutate.Append(img, adds...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Created = runtime.GOARCH, "linux", created
	cf.Config = v1.Config{
		User:         fmt.Sprintf("%d:%d", userID, userID),
		WorkingDir:   workDir,
		Entrypoint:   []string{binaryPath},
		Cmd:          []string{"run", "--config", configDir + "/runtime.toml"},
		Env:          []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		ExposedPorts: map[string]struct{}{apiPort: {}},
		Labels: map[string]string{
			"org.opencontainers.image.title":       "pico-connectors",
			"org.opencontainers.image.description": "Connectors for PicoMQ: S3 sink, Postgres source, random source",
			"org.opencontainers.image.source":      s.Source,
			"org.opencontainers.image.version":     s.Version,
			"org.opencontainers.image.revision":    s.Revision,
			"org.opencontainers.image.created":     s.Epoch.UTC().Format(time.RFC3339),
		},
		StopSignal: "SIGTERM",
	}
	return mutate.ConfigFile(img, cf)
}

// build makes the image s describes and writes it to out, an OCI layout
// tarball that docker load also reads; it returns the manifest's digest.
func build(s spec, out string) (v1.Hash, error) {
	dir, err := os.MkdirTemp("", "pico-image-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.RemoveAll(dir)
	bin, err := buildBinary(s.Root, dir)
	if err != nil {
		return v1.Hash{}, err
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return v1.Hash{}, err
	}
	libs, err := sharedLibraries(bin)
	if err != nil {
		return v1.Hash{}, err
	}
	img, err := image(s, data, libs)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := writeTarball(out, img, s.Tag, s.Epoch); err != nil {
		return v1.Hash{}, err
	}
	return img.Digest()
}
