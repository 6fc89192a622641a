package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
)

// TestImage builds the image tarball twice from the checkout (the binary
// compiled each time) and checks that both give the same digest and the
// same bytes; reads it as an OCI layout (podman load, containerd) and as a
// docker save archive (docker load, crane push) and finds the same
// manifest in both; then unpacks its layers into a folder and runs its
// binary there with chroot, as the image's user, in the image's working
// directory and with its environment only: version, validate of the
// examples, and 10 s of the demo on the embedded broker with /health and
// /ready answering 200 from the test. Nothing of the host is reachable from
// the chroot, so this proves the image holds all the binary needs.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds pico-connectors and the image; skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: unpacks the image with its owners and runs its binary with chroot as the image's user (CI runs as root)")
	}
	s, err := specFromGit(".", "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	s.Tag = "picomq/pico-connectors:test"
	dir := t.TempDir()
	out := filepath.Join(dir, "pico-connectors.oci.tar")
	digest, err := build(s, out)
	if err != nil {
		t.Fatal(err)
	}
	again := filepath.Join(dir, "again.oci.tar")
	digest2, err := build(s, again)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(again)
	if digest != digest2 || !bytes.Equal(a, b) {
		t.Fatalf("two builds of one commit differ: %s (%d bytes) and %s (%d bytes)", digest, len(a), digest2, len(b))
	}
	t.Logf("image %s, %.1f MB, digest stable across two builds", digest, float64(len(a))/1e6)

	img := readBothWays(t, out, digest)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	labels := c.Labels
	if labels["org.opencontainers.image.source"] != "https://github.com/picomq/pico-connectors" ||
		labels["org.opencontainers.image.revision"] != s.Revision || labels["org.opencontainers.image.version"] != s.Version ||
		!cf.Created.Time.Equal(s.Epoch) {
		t.Errorf("labels %v, created %v; want revision %s, version %s, created %v", labels, cf.Created, s.Revision, s.Version, s.Epoch)
	}
	if _, ok := c.ExposedPorts["8081/tcp"]; !ok || len(c.Entrypoint) != 1 || c.WorkingDir == "" {
		t.Errorf("config %+v: want port 8081/tcp, one entrypoint and a working directory", c)
	}

	root := filepath.Join(dir, "root")
	unpack(t, img, root)
	uid, gid := imageUser(t, root, c.User)

	// What runs in the chroot: the image's entrypoint, working directory
	// and environment, as its user.
	chrooted := func(extraEnv []string, args ...string) *exec.Cmd {
		cmd := exec.Command(c.Entrypoint[0], args...)
		cmd.Dir = c.WorkingDir
		cmd.Env = append(append([]string{}, c.Env...), extraEnv...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: uid, Gid: gid}}
		return cmd
	}

	outp, err := chrooted(nil, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(outp), "pico-connectors ") || !strings.Contains(string(outp), "libpicomq_connector_s3_sink") {
		t.Fatalf("version in the chroot: %v\n%s", err, outp)
	}

	// The examples, copied into the working directory, as an operator
	// mounts them.
	work := filepath.Join(root, c.WorkingDir)
	examples := filepath.Join(s.Root, "examples")
	tomls, _ := filepath.Glob(filepath.Join(examples, "*.toml"))
	demo, _ := filepath.Glob(filepath.Join(examples, "demo", "connectors", "*.toml"))
	if len(tomls) < 3 || len(demo) < 2 {
		t.Fatalf("examples: %v, demo: %v", tomls, demo)
	}
	for _, f := range tomls {
		copyOwned(t, f, filepath.Join(work, "examples", "connectors", filepath.Base(f)), uid, gid)
	}
	writeOwned(t, filepath.Join(work, "examples", "runtime.toml"), []byte("connectors_dir = \"connectors\"\n"), uid, gid)
	copyOwned(t, filepath.Join(examples, "demo", "runtime.toml"), filepath.Join(work, "demo", "runtime.toml"), uid, gid)
	for _, f := range demo {
		copyOwned(t, f, filepath.Join(work, "demo", "connectors", filepath.Base(f)), uid, gid)
	}
	for _, cfg := range []string{"examples/runtime.toml", "demo/runtime.toml"} {
		outp, err := chrooted(nil, "validate", "--config", cfg).CombinedOutput()
		if err != nil || !strings.Contains(string(outp), "is valid") {
			t.Errorf("validate --config %s in the chroot: %v\n%s", cfg, err, outp)
		}
	}

	// The demo for 10 s, on free ports, with the test asking its API.
	logs := &runtimebin.Output{}
	cmd := chrooted([]string{
		"PICOMQ_CONNECTORS_BROKER_EMBEDDED_ADDRESS=127.0.0.1:0",
		"PICOMQ_CONNECTORS_HTTP_ADDRESS=127.0.0.1:0",
		"PICOMQ_CONNECTORS_LOG_FORMAT=json",
	}, "run", "--config", "demo/runtime.toml")
	cmd.Stdout, cmd.Stderr = logs, logs
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var runErr error
	exited := make(chan struct{})
	go func() { runErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
	})
	api := "http://" + apiAddress(t, logs, exited)
	poll(t, logs, "/health and /ready answer 200 and the random source has produced", func() bool {
		var src struct {
			Counters struct {
				Produced int64 `json:"records_produced"`
			} `json:"counters"`
		}
		return get(api+"/health", nil) == 200 && get(api+"/ready", nil) == 200 &&
			get(api+"/sources/demo_random", &src) == 200 && src.Counters.Produced > 0
	})
	time.Sleep(time.Until(start.Add(10 * time.Second)))
	for _, p := range []string{"/health", "/ready"} {
		if code := get(api+p, nil); code != 200 {
			t.Errorf("GET %s after 10 s = %d\n%s", p, code, logs.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if runErr != nil {
			t.Fatalf("run after SIGTERM: %v\n%s", runErr, logs.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("run did not stop within 60 s of SIGTERM\n%s", logs.String())
	}
	// The image's user wrote the checkpoint into the working directory.
	states, _ := filepath.Glob(filepath.Join(work, "demo", ".state", "*"))
	if len(states) == 0 {
		t.Fatalf("no checkpoint in %s/demo/.state\n%s", c.WorkingDir, logs.String())
	}
	if st, err := os.Stat(states[0]); err != nil || st.Sys().(*syscall.Stat_t).Uid != uid {
		t.Errorf("checkpoint %s: %v, want owned by uid %d", states[0], err, uid)
	}
}

// readBothWays reads the tarball at path as crane push and docker load do
// (manifest.json) and as an OCI image layout (index.json), validates both
// (every digest, size and diff id) and checks that both are the manifest
// digest build returned.
func readBothWays(t *testing.T, path string, digest v1.Hash) v1.Image {
	t.Helper()
	docker, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		t.Fatalf("as a docker save archive: %v", err)
	}
	if err := validate.Image(docker); err != nil {
		t.Fatalf("as a docker save archive: %v", err)
	}
	if d, err := docker.Digest(); err != nil || d != digest {
		t.Fatalf("crane push would push %v (%v), the index names %s", d, err, digest)
	}
	dir := filepath.Join(t.TempDir(), "layout")
	extract(t, mustOpen(t, path), dir, false)
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("as an OCI layout: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 || im.Manifests[0].Digest != digest ||
		im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "test" {
		t.Fatalf("index.json: %+v, %v; want one manifest %s named test", im, err, digest)
	}
	img, err := idx.Image(digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Image(img); err != nil {
		t.Fatalf("as an OCI layout: %v", err)
	}
	return img
}

func mustOpen(t *testing.T, path string) io.Reader {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(b)
}

// unpack extracts the image's layers into root, in order, with their
// modes and owners.
func unpack(t *testing.T, img v1.Image, root string) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		extract(t, rc, root, true)
		rc.Close()
	}
}

// extract writes the tar stream r into dir; with owners, it sets each
// entry's uid, gid and mode bits (sticky included) as the tar says.
func extract(t *testing.T, r io.Reader, dir string, owners bool) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Clean(h.Name)
		if !filepath.IsLocal(name) {
			t.Fatalf("tar entry %q leaves its folder", h.Name)
		}
		p := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				var b []byte
				if b, err = io.ReadAll(tr); err == nil {
					err = os.WriteFile(p, b, 0o644)
				}
			}
		default:
			t.Fatalf("tar entry %q has type %c, which the image never holds", h.Name, h.Typeflag)
		}
		if err == nil && owners {
			if err = os.Lchown(p, h.Uid, h.Gid); err == nil {
				err = os.Chmod(p, h.FileInfo().Mode()&(os.ModePerm|os.ModeSticky|os.ModeSetuid|os.ModeSetgid))
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// imageUser resolves the config's User ("uid:gid") and checks that it is
// not root and that the image's /etc/passwd and /etc/group name it.
func imageUser(t *testing.T, root, user string) (uint32, uint32) {
	t.Helper()
	us, gs, ok := strings.Cut(user, ":")
	uid, err1 := strconv.ParseUint(us, 10, 32)
	gid, err2 := strconv.ParseUint(gs, 10, 32)
	if !ok || err1 != nil || err2 != nil || uid == 0 || gid == 0 {
		t.Fatalf("image user %q: want a numeric uid:gid, not root", user)
	}
	passwd, _ := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	group, _ := os.ReadFile(filepath.Join(root, "etc", "group"))
	if !strings.Contains(string(passwd), fmt.Sprintf(":x:%d:%d:", uid, gid)) || !strings.Contains(string(group), fmt.Sprintf(":x:%d:", gid)) {
		t.Errorf("/etc/passwd or /etc/group lack %s:\n%s%s", user, passwd, group)
	}
	return uint32(uid), uint32(gid)
}

func writeOwned(t *testing.T, path string, data []byte, uid, gid uint32) {
	t.Helper()
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		defer os.Chown(d, int(uid), int(gid)) // parents first made, then owned
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, int(uid), int(gid)); err != nil {
		t.Fatal(err)
	}
}

func copyOwned(t *testing.T, from, to string, uid, gid uint32) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeOwned(t, to, b, uid, gid)
}

// apiAddress waits for the runtime's "http api listening" log line and
// returns its address.
func apiAddress(t *testing.T, logs *runtimebin.Output, exited <-chan struct{}) string {
	t.Helper()
	var addr string
	poll(t, logs, "the http api listening", func() bool {
		select {
		case <-exited:
			t.Fatalf("run exited before its API listened\n%s", logs.String())
		default:
		}
		for _, line := range strings.Split(logs.String(), "\n") {
			var l struct{ Msg, Address string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "http api listening" {
				addr = l.Address
				return true
			}
		}
		return false
	})
	return addr
}

// poll waits up to a minute for cond.
func poll(t *testing.T, logs *runtimebin.Output, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within a minute\n%s", what, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// get asks url and decodes a JSON body into v when v is not nil; it
// returns the status code, or 0 when the request failed.
func get(url string, v any) int {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if v != nil && json.NewDecoder(resp.Body).Decode(v) != nil {
		return 0
	}
	return resp.StatusCode
}

// TestLayerTar checks what makes a layer's bytes depend on its files
// alone: the same files in another order give the same bytes; entries are
// sorted, parents made (root, 0755) unless listed, every time is the epoch
// and owners are the ids given.
func TestLayerTar(t *testing.T) {
	epoch := time.Unix(1700000000, 0).UTC()
	files := []entry{
		{name: "/var/lib/pico-connectors", mode: 0o750, dir: true, uid: userID, gid: userID},
		{name: "/etc/passwd", mode: 0o644, data: []byte("root:x:0:0::/:/sbin/nologin\n")},
		{name: "/tmp", mode: 0o1777, dir: true},
		{name: "/usr/local/bin/pico-connectors", mode: 0o755, data: []byte("\x7fELF")},
	}
	a, err := layerTar(files, epoch)
	if err != nil {
		t.Fatal(err)
	}
	b, err := layerTar([]entry{files[3], files[2], files[1], files[0]}, epoch)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("the same files in another order give other bytes")
	}
	var got []string
	tr := tar.NewReader(bytes.NewReader(a))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(epoch) || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: time %v, names %q %q", h.Name, h.ModTime, h.Uname, h.Gname)
		}
		got = append(got, fmt.Sprintf("%s %o %d:%d", h.Name, h.Mode, h.Uid, h.Gid))
	}
	want := []string{
		"etc/ 755 0:0", "etc/passwd 644 0:0", "tmp/ 1777 0:0",
		"usr/ 755 0:0", "usr/local/ 755 0:0", "usr/local/bin/ 755 0:0", "usr/local/bin/pico-connectors 755 0:0",
		"var/ 755 0:0", "var/lib/ 755 0:0", "var/lib/pico-connectors/ 750 65532:65532",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestBadSourceDateEpoch: a SOURCE_DATE_EPOCH that is not a count of
// seconds is refused with the variable, the value and what is allowed.
func TestBadSourceDateEpoch(t *testing.T) {
	for _, v := range []string{"abc", "-5", "2026-12-04"} {
		_, err := specFromGit(".", "v1", "abc123", v)
		if err == nil || !strings.Contains(err.Error(), "SOURCE_DATE_EPOCH") || !strings.Contains(err.Error(), fmt.Sprintf("%q", v)) ||
			!strings.Contains(err.Error(), "seconds since 1970") {
			t.Errorf("SOURCE_DATE_EPOCH=%s: %v", v, err)
		}
	}
	s, err := specFromGit(".", "v1", "abc123", "1700000000")
	if err != nil || !s.Epoch.Equal(time.Unix(1700000000, 0)) || s.Version != "v1" || s.Revision != "abc123" {
		t.Errorf("spec %+v, %v", s, err)
	}
}
