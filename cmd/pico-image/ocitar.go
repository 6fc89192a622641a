package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
// since Docker 25. It is written as a layer is (layerTar: sorted, the time
// epoch, root as owner), so its bytes depend on the image alone. tag names
// the image when it is loaded.
func writeTarball(out string, img v1.Image, tag string, epoch time.Time) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("image tag %q: %v", tag, err)
	}
	// Every blob is stored under its content address, computed from its
	// bytes: the image's digest, config name and layer digests are those.
	blobs := map[string][]byte{}
	blobPath := func(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }
	put := func(b []byte, err error) (v1.Hash, []byte, error) {
		if err != nil {
			return v1.Hash{}, nil, err
		}
		h, _, err := v1.SHA256(bytes.NewReader(b))
		blobs[blobPath(h)] = b
		return h, b, err
	}
	digest, manifest, err := put(img.RawManifest())
	if err != nil {
		return err
	}
	configName, _, err := put(img.RawConfigFile())
	if err != nil {
		return err
	}
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
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		d, _, err := put(io.ReadAll(rc))
		rc.Close()
		if err != nil {
			return err
		}
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
	files := []entry{{name: "/oci-layout", data: []byte(`{"imageLayoutVersion":"1.0.0"}`)}}
	ij, err := json.Marshal(index)
	if err != nil {
		return err
	}
	mj, err := json.Marshal([]dockerManifest{dm})
	if err != nil {
		return err
	}
	files = append(files, entry{name: "/index.json", data: ij}, entry{name: "/manifest.json", data: mj})
	for p, b := range blobs {
		files = append(files, entry{name: "/" + p, data: b})
	}
	for i := range files {
		files[i].mode = 0o644
	}
	tarBytes, err := layerTar(files, epoch)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	// Written beside out and renamed, so a failed run leaves no half tarball.
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, tarBytes, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}
