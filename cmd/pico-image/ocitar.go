package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// dockerManifest is one entry of manifest.json, the file docker load (and
// go-containerregistry's tarball package, so crane push) reads.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// writeTarball writes img to out as one tar that is both an OCI image
// layout (oci-layout, index.json, blobs/sha256/...), which podman load,
// containerd and docker load (25 and later) read, and a docker save
// archive (manifest.json naming the same blobs), which docker load of any
// version and crane push read. It is the layout docker save itself writes
// since Docker 25. Entries are sorted, with the time epoch and root as
// owner, so the tarball's bytes depend on the image alone. tag names the
// image when it is loaded.
func writeTarball(out string, img v1.Image, tag string, epoch time.Time) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("image tag %q: %v", tag, err)
	}
	blobs := map[string][]byte{}
	blobPath := func(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }
	manifest, err := img.RawManifest()
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	blobs[blobPath(digest)] = manifest
	config, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	configName, err := img.ConfigName()
	if err != nil {
		return err
	}
	blobs[blobPath(configName)] = config
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	// docker save's forms: familiar in manifest.json, full for containerd.
	familiar, full := ref.RepositoryStr()+":"+ref.TagStr(), ref.Name()
	if ref.RegistryStr() == name.DefaultRegistry {
		full = "docker.io/" + familiar
	} else {
		familiar = full
	}
	dm := dockerManifest{Config: blobPath(configName), RepoTags: []string{familiar}}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return err
		}
		blobs[blobPath(d)] = b
		dm.Layers = append(dm.Layers, blobPath(d))
	}
	index := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{{
		MediaType: types.DockerManifestSchema2, Size: int64(len(manifest)), Digest: digest,
		// As docker save writes them: containerd names the image after the
		// first, the OCI layout spec and podman after the second.
		Annotations: map[string]string{
			"io.containerd.image.name":          full,
			"org.opencontainers.image.ref.name": ref.TagStr(),
		},
	}}}
	files := map[string][]byte{"oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`)}
	if files["index.json"], err = json.Marshal(index); err != nil {
		return err
	}
	if files["manifest.json"], err = json.Marshal([]dockerManifest{dm}); err != nil {
		return err
	}
	for p, b := range blobs {
		files[p] = b
	}
	names := []string{"blobs/", "blobs/sha256/"}
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		h := &tar.Header{Name: n, Mode: 0o644, ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		b, ok := files[n]
		if !ok {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		}
		h.Size = int64(len(b))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(b); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	// Written beside out and renamed, so a failed run leaves no half tarball.
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}
